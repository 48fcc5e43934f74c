"""A daemon scenario run from an installed wheel (called by scripts/wheel_check).

Run with the fresh virtualenv's python, from a directory outside the clone, so
every import and every data file comes from the installed packages: ingest,
compact, teach, query after the compaction (it reads the node ranker's
weights), grep in every mode, describe a summary, and ``brain mcp``'s tool list
through the official MCP SDK client (the ``mcp`` extra installed from the wheel).
Prints one JSON line of what it saw; exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio


def _installed() -> dict[str, str]:
    """Where brain's packages were imported from: inside this virtualenv, never the clone."""
    import brain
    import daemon
    import protocol

    where = {m.__name__: str(Path(m.__file__ or "").resolve()) for m in (brain, daemon, protocol)}
    prefix = str(Path(sys.prefix).resolve())
    shadowed = {name: path for name, path in where.items() if not path.startswith(prefix)}
    assert not shadowed, f"imported from outside the installed wheel: {shadowed}"
    return where


def _turns(n: int) -> list[dict[str, Any]]:
    """A conversation long enough that ``compact`` folds most of it."""
    topics = ["deploy key", "staging database", "release notes", "vault policy", "backup job"]
    out: list[dict[str, Any]] = []
    for i in range(n):
        topic = topics[i % len(topics)]
        role = "user" if i % 2 == 0 else "assistant"
        text = f"Turn {i}: the {topic} was checked on host node-{i} and logged as ticket T-{i}."
        out.append({"id": f"w{i}", "role": role, "content": text})
    out.append({"id": "w-key", "role": "user", "content": "The deploy key lives in vault/ci."})
    return out


def _daemon(db: Path) -> dict[str, Any]:
    from protocol import Client

    seen: dict[str, Any] = {}
    with Client.spawn(db, stderr=sys.stderr) as brain:
        stored = brain.call("ingest", {"session": "w", "messages": _turns(80)})
        assert stored["ingested"] == 81, stored
        compacted = brain.call("compact", {"session": "w"})
        assert compacted["summaries"], compacted
        seen["summaries"] = len(compacted["summaries"])
        summary = brain.call("describe", {"id": compacted["summaries"][0], "session": "w"})
        assert summary["kind"] == "summary", summary
        taught = brain.call("teach", {"content": "Deploy keys are rotated every 90 days."})
        assert taught["node_id"], taught
        # After a compaction the summaries are graph nodes: query seeds them through the
        # learned node ranker, whose weights are a data file of the package.
        recalled = brain.call("query", {"query": "how often are deploy keys rotated?"})
        reached = {seed[0] for seed in recalled["seeds"]} | set(recalled["fired_nodes"])
        assert taught["node_id"] in reached, recalled
        seen["query_fired"] = len(recalled["fired_nodes"])
        while brain.call("info")["embeddings"]["pending"]:  # semantic answers from vectors
            time.sleep(0.05)
        for mode in ("full_text", "regex", "semantic", "hybrid"):
            query = r"vault/\w+" if mode == "regex" else "where does the deploy key live"
            found = brain.call("grep", {"query": query, "mode": mode, "session": "w"})
            ids = [h["id"] for h in found["hits"]]
            assert "w-key" in ids, (mode, found)
            seen[f"grep_{mode}"] = len(ids)
    return seen


async def _mcp_tools(db: Path) -> list[str]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    brain = Path(sys.executable).parent / "brain"
    server = StdioServerParameters(
        command=str(brain), args=["mcp", "--db", str(db)], env=dict(os.environ)
    )
    with anyio.fail_after(60):
        async with Client(server) as client:
            return [t.name for t in (await client.list_tools()).tools]


def main() -> None:
    """Run the scenario on a fresh database in a temporary directory."""
    where = _installed()
    with tempfile.TemporaryDirectory(prefix="brain-wheel-") as tmp:
        db = Path(tmp) / "wheel.db"
        seen = _daemon(db)
        tools = anyio.run(_mcp_tools, db)
        from daemon.mcp.tools import MCP_TOOLS

        assert sorted(tools) == sorted(t.name for t in MCP_TOOLS), tools
        seen["mcp_tools"] = len(tools)
    print(json.dumps({"installed": where, **seen}))


if __name__ == "__main__":
    main()
