"""Deterministic, English-ish message content: the generated conversations most benchmarks
ingest."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from benches.core import Message
from brain import MessageIn

# -- deterministic, English-ish content ------------------------------------------------

_WORD_TEXT: Final = (
    "the of and to in is that for it as was with be by on not he this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "more can about what up said out them into time some could only other new like then than now "
    "over also after first two may any way these our well should because each just those people "
    "how too little state good very make world still see own men work long here get both between "
    "life being under never day same another know while last might us great old year off come "
    "since against go came right used take three memory agent session message context summary "
    "token budget query search index graph node edge learn file payload daemon request answer "
    "database commit checkpoint latency throughput retry error config deploy branch review test "
    "failure fix patch release user assistant tool function result output input schema table "
    "column migration version cache buffer stream pipe thread process signal timeout window "
    "prompt model embedding vector score rank recall precision batch queue worker lock wait "
    "write read disk network server client customer invoice meeting calendar project deadline "
    "budget report draft email note task plan idea question problem solution reason example "
    "detail change update issue ticket"
)
WORDS: Final = tuple(_WORD_TEXT.split())
_NAMES: Final = ("Alice", "Bob", "Carol", "Dmitri", "Eve", "Farah", "Goran", "Hana", "Ivan")
IDENTS: Final = (
    "parse_request()",
    "Store.execute",
    "brain.db",
    "/var/log/app.log",
    "PR #4312",
    "HTTP 503",
    "v2.14.1",
    "--max-inflight",
    "user_id=8841",
    "SELECT count(*)",
)
_ENDINGS: Final = (".", ".", ".", "?", "!", ".")


def make_content(rng: random.Random, low: int = 200, high: int = 800) -> str:
    """One chat message of ``low``-``high`` characters: sentences of common and technical words."""
    target = rng.randint(low, high)
    sentences: list[str] = []
    length = 0
    while length < target:
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
        roll = rng.random()
        if roll < 0.25:
            words.insert(rng.randrange(len(words)), rng.choice(IDENTS))
        elif roll < 0.4:
            words.insert(rng.randrange(len(words)), rng.choice(_NAMES))
        elif roll < 0.5:
            words.insert(rng.randrange(len(words)), str(rng.randint(2, 99_999)))
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(_ENDINGS)
        sentences.append(sentence)
        length += len(sentence) + 1
    text = " ".join(sentences)
    if len(text) > target:
        cut = text.rfind(" ", 0, target)
        text = text[: cut if cut >= low else target].rstrip(" ,") + "."
    return text


def make_messages(count: int, sessions: int, seed: int) -> list[tuple[str, Message]]:
    """``count`` wire messages as (session, message), spread round-robin over sessions."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    out: list[tuple[str, Message]] = []
    for n in range(count):
        session = f"bench-{n % sessions}"
        turn = n // sessions
        message: Message = {
            "role": "user" if turn % 2 == 0 else "assistant",
            "content": make_content(rng),
            "id": f"{session}-m{turn}",
            "created_at": (start + timedelta(seconds=n)).isoformat().replace("+00:00", "Z"),
        }
        out.append((session, message))
    return out


def batches(messages: Sequence[tuple[str, Message]], size: int) -> list[tuple[str, list[Message]]]:
    """Group messages into per-session batches of at most ``size``, in a round-robin order."""
    per_session: dict[str, list[Message]] = {}
    for session, message in messages:
        per_session.setdefault(session, []).append(message)
    chunked = {
        s: [ms[i : i + size] for i in range(0, len(ms), size)] for s, ms in per_session.items()
    }
    out: list[tuple[str, list[Message]]] = []
    rounds = max((len(c) for c in chunked.values()), default=0)
    for r in range(rounds):
        for session, chunks in chunked.items():
            if r < len(chunks):
                out.append((session, chunks[r]))
    return out


def message_in(m: Message) -> MessageIn:
    """The engine's input type for a wire message."""
    return MessageIn(
        role=m["role"], content=m["content"], client_id=m["id"], created_at=m["created_at"]
    )


RARE_VOCAB: Final = 40_000  # pseudo-words drawn with a Zipf law beside the common words
_CONTENT_CACHE: dict[tuple[int, int], list[str]] = {}


def pseudo_word(i: int) -> str:
    """A deterministic pronounceable word for rank ``i`` (the long tail of a vocabulary)."""
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    out = []
    i += 1
    while i:
        i, r = divmod(i, 80)
        out.append(consonants[r % 16] + vowels[r // 16])
    return "".join(out)


def diverse_texts(count: int, seed: int) -> list[str]:
    """``count`` chat turns of 60-300 characters with a Zipf-like vocabulary.

    Common words come from ``WORDS``; about a third of the words are drawn from a
    40,000-word long tail with a Zipf law, so full-text posting lists range from most
    rows (common words) to a handful (rare ones), as in real chat.
    """
    key = (count, seed)
    if key in _CONTENT_CACHE:
        return _CONTENT_CACHE[key]
    import numpy as np

    rng = np.random.default_rng(seed)
    tail = [pseudo_word(i) for i in range(RARE_VOCAB)]
    lengths = rng.integers(8, 45, size=count)
    total = int(lengths.sum())
    common = rng.integers(0, len(WORDS), size=total)
    rare = (rng.zipf(1.15, size=total) - 1) % RARE_VOCAB
    use_rare = rng.random(total) < 0.35
    words = [tail[r] if u else WORDS[c] for c, r, u in zip(common, rare, use_rare, strict=True)]
    out: list[str] = []
    at = 0
    for n in lengths.tolist():
        text = " ".join(words[at : at + n])
        at += n
        out.append(text[0].upper() + text[1:300] + ".")
    _CONTENT_CACHE[key] = out
    return out
