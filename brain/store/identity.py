"""The embedder identity recorded in the store: whose vectors the database holds.

Apart from ``brain.vectors.index`` (which needs numpy) so that ``info`` can name the stored
embedder without loading numpy.

Tested with the vector index that records it (``tests/brain/vectors/test_index.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.store.connection import Store


def stored_identity(store: Store) -> tuple[str, str] | None:
    """The (name, dim) of the embedder the stored vectors belong to, if one is recorded."""
    stored = dict(
        store.execute("SELECT key, value FROM meta WHERE key IN ('embedder_name', 'embedder_dim')")
    )
    if "embedder_name" not in stored:
        return None
    return str(stored["embedder_name"]), str(stored.get("embedder_dim"))
