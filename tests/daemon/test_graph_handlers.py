"""The graph handlers' threads: a query whose embedder runs in the process never waits on
the embedding provider's threads (one database thread hop, not two)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import anyio
import pytest

from brain import Brain, BrainConfig, HashEmbedder, NewNode
from brain.graph.retrieval import FiredNode, LearnResult
from daemon.context import Context
from daemon.handlers import graph
from protocol.methods import LearnParams, QueryParams

pytestmark = pytest.mark.anyio


async def test_a_query_with_an_in_process_embedder_is_answered_while_the_provider_is_taken(
    db_path: Path,
) -> None:
    engine = Brain(db_path, BrainConfig(), embedder=HashEmbedder())
    hung = threading.Event()
    try:
        taught = engine.teach(NewNode("teaching", "the staging cluster is called kestrel"))
        ctx = Context(engine, provider_concurrency=1, provider_deadline_s=30.0)
        async with anyio.create_task_group() as tg:
            # The embedding provider's only thread is taken (a slow endpoint, say).
            tg.start_soon(ctx.embedding.run, hung.wait)
            await anyio.sleep(0)
            with anyio.fail_after(20):
                found = await graph.query(
                    ctx, QueryParams(query="which staging cluster?", chat_id="c")
                )
            hung.set()
        assert found["fired_nodes"] == [taught.node_id]
        assert found["trace_id"]
        # Built field by field for speed: still every field of a fired node.
        assert set(found["nodes"][0]) == {f.name for f in dataclasses.fields(FiredNode)}
        learned = await graph.learn(ctx, LearnParams(outcome=1.0, chat_id="c"))
        assert set(learned) == {f.name for f in dataclasses.fields(LearnResult)}
        assert learned["trace_id"] == found["trace_id"]
    finally:
        hung.set()
        engine.close()
