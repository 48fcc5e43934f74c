"""The whole daemon life over memory streams: open, serve, auto-save, close."""

from __future__ import annotations

from pathlib import Path

import anyio
import orjson
import pytest

from brain import Brain, BrainConfig
from daemon.config import DaemonConfig
from daemon.context import Context
from daemon.runner import AutoSaver, run
from protocol.framing import encode_frame
from tests.daemon.conftest import DEADLINE, MemorySink, MemorySource

pytestmark = pytest.mark.anyio


async def test_run_serves_until_eof_then_closes_and_returns_zero(tmp_path: Path) -> None:
    config = DaemonConfig(db=tmp_path / "d.db")
    source, sink = MemorySource(), MemorySink()
    message = {"role": "user", "content": "remember this"}
    await source.send.send(
        encode_frame({"id": 1, "method": "ingest", "params": {"session": "s", "message": message}})
    )
    await source.send.aclose()
    with anyio.fail_after(DEADLINE):
        code = await run(config, source, sink)
    assert code == 0
    frame = orjson.loads(await sink.recv.receive())
    assert frame["result"]["ingested"] == 1
    for stream in (source._recv, sink._send, sink.recv):
        await stream.aclose()
    reopened = Brain(config.db)
    try:
        assert reopened.info().messages == 1
    finally:
        reopened.close()


async def test_auto_save_runs_after_the_configured_number_of_writes(tmp_path: Path) -> None:
    engine = Brain(tmp_path / "a.db", BrainConfig())
    context = Context(engine)
    saver = AutoSaver(context, every_writes=3, every_seconds=3600)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(saver.run)
            for _ in range(2):
                context.note_write()
            await anyio.sleep(0.05)
            assert saver.saves == 0
            context.note_write()
            with anyio.fail_after(DEADLINE):
                while saver.saves == 0:
                    await anyio.sleep(0.01)
            assert saver.saved_at == 3
            tg.cancel_scope.cancel()
    finally:
        engine.close()


async def test_auto_save_runs_on_the_timer_only_when_dirty(tmp_path: Path) -> None:
    engine = Brain(tmp_path / "t.db", BrainConfig())
    context = Context(engine)
    saver = AutoSaver(context, every_writes=1000, every_seconds=0.02)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(saver.run)
            await anyio.sleep(0.1)
            assert saver.saves == 0
            context.note_write()
            with anyio.fail_after(DEADLINE):
                while saver.saves == 0:
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    finally:
        engine.close()
