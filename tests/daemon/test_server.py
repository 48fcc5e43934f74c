"""The request loop over memory streams: every line answered, lanes, shutdown."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from brain import Brain
from daemon.context import Context
from daemon.handlers import HANDLERS, Handler
from protocol.methods import METHODS, IngestParams, MethodSpec, NoParams
from tests.daemon.conftest import Harness, start

pytestmark = pytest.mark.anyio


async def test_ping_is_answered(running: Harness) -> None:
    await running.write({"id": 1, "method": "ping"})
    assert await running.read() == {"id": 1, "result": {"pong": True}}


async def test_jsonrpc_marker_is_echoed(running: Harness) -> None:
    await running.write({"jsonrpc": "2.0", "id": "x", "method": "ping"})
    assert await running.read() == {"jsonrpc": "2.0", "id": "x", "result": {"pong": True}}


@pytest.mark.parametrize(
    ("line", "code", "answer_id"),
    [
        (b"not json\n", -32700, None),
        (b"\xff\xfe\xfd\n", -32700, None),
        (b'{"id": 1, "method": "ping"\x00}\n', -32700, None),
        (b"[]\n", -32600, None),
        (b'"ping"\n', -32600, None),
        (b'{"id": 2}\n', -32600, 2),
        (b'{"id": 3, "method": "nope"}\n', -32601, 3),
        (b'{"id": 4, "method": "ingest", "params": {}}\n', -32602, 4),
        (b'{"id": 5, "method": "ping", "params": {"x": 1}}\n', -32602, 5),
        (b'{"id": 6, "method": "ping", "params": 3}\n', -32602, 6),
        (b'{"id": 99999999999999999999999999, "method": "ping"}\n', -32600, None),
    ],
)
async def test_every_bad_line_gets_the_documented_error(
    running: Harness, line: bytes, code: int, answer_id: Any
) -> None:
    await running.write(line)
    frame = await running.read()
    assert frame["id"] == answer_id
    assert frame["error"]["code"] == code
    await running.write({"id": "after", "method": "ping"})
    assert (await running.read())["result"] == {"pong": True}


async def test_invalid_params_name_the_field(running: Harness) -> None:
    await running.write(
        {"id": 1, "method": "ingest", "params": {"session": "s", "message": {"role": "user"}}}
    )
    error = (await running.read())["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("params.message.content")


async def test_an_oversized_line_is_answered_and_reading_goes_on(engine: Brain) -> None:
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, max_line=64)
        await harness.write(
            b'{"id": 1, "method": "ping", "params": {"pad": "' + b"x" * 200 + b'"}}\n'
        )
        await harness.write({"id": 2, "method": "ping"})
        first, second = await harness.read_n(2)
        assert first["id"] is None
        assert first["error"]["code"] == -32700
        assert first["error"]["data"] == {"limit": 64}
        assert second == {"id": 2, "result": {"pong": True}}
        await harness.eof()
        await harness.wait_finished()


async def test_notifications_get_no_answer(running: Harness) -> None:
    await running.write(
        {"method": "ping"},
        {"method": "nope"},
        {
            "method": "ingest",
            "params": {"session": "n", "message": {"role": "user", "content": "x"}},
        },
        {"id": 1, "method": "info"},
    )
    frame = await running.read()
    assert frame["id"] == 1
    # The ingest notification ran (before info, since lanes never reorder a
    # session and info read after it completed) or is still running; either
    # way nothing else is ever written for the three notifications.
    await running.eof()
    await running.wait_finished()
    assert running.leftover == 0


async def test_ingest_result_has_pinned_members(running: Harness) -> None:
    params = {
        "session": "s",
        "messages": [
            {"id": "a", "role": "user", "content": "hello"},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
        ],
    }
    await running.write({"id": 1, "method": "ingest", "params": params})
    result = (await running.read())["result"]
    assert result["ingested"] == 2
    assert result["duplicates"] == 0
    assert result["ids"][0] == "a"
    assert result["ids"][1].startswith("msg_")
    await running.write({"id": 2, "method": "ingest", "params": params})
    again = (await running.read())["result"]
    assert (again["ingested"], again["duplicates"]) == (0, 2)
    assert again["ids"] == result["ids"]


async def test_info_has_pinned_counts(running: Harness) -> None:
    await running.write(
        {
            "id": 1,
            "method": "ingest",
            "params": {"session": "s", "message": {"role": "user", "content": "x"}},
        },
        {
            "id": 2,
            "method": "ingest",
            "params": {"session": "t", "message": {"role": "user", "content": "y"}},
        },
    )
    await running.read_n(2)
    await running.write({"id": 3, "method": "info"})
    info = (await running.read())["result"]
    for key in ("version", "conversations", "messages", "summaries", "nodes", "edges"):
        assert key in info
    assert (info["conversations"], info["messages"]) == (2, 2)


async def test_pipelined_requests_for_one_session_apply_in_arrival_order(running: Harness) -> None:
    requests = [
        {
            "id": i,
            "method": "ingest",
            "params": {
                "session": "order",
                "message": {"role": "user", "content": f"m{i}", "id": f"c{i}"},
            },
        }
        for i in range(60)
    ]
    await running.write(*requests)
    frames = await running.read_n(60)
    seq_by_client_id = {f["result"]["ids"][0]: f["result"]["messages"][0]["seq"] for f in frames}
    assert [seq_by_client_id[f"c{i}"] for i in range(60)] == list(range(1, 61))


async def test_requests_on_other_lanes_overtake_a_slow_one(engine: Brain) -> None:
    release = anyio.Event()
    started: list[str] = []

    async def slow_ingest(ctx: Context, params: IngestParams) -> dict[str, Any]:
        started.append(params.session)
        if params.session == "slow":
            await release.wait()
        return {"session": params.session}

    handlers = dict(HANDLERS)
    handlers["ingest"] = Handler(slow_ingest, lambda p: f"session:{p.session}", mutates=True)

    def ingest(request_id: int, session: str) -> dict[str, Any]:
        message = {"role": "user", "content": "x"}
        return {
            "id": request_id,
            "method": "ingest",
            "params": {"session": session, "message": message},
        }

    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers)
        await harness.write(
            ingest(1, "slow"), ingest(2, "slow"), ingest(3, "fast"), {"id": 4, "method": "ping"}
        )
        first, second = await harness.read_n(2)
        assert {first["id"], second["id"]} == {3, 4}
        # The second "slow" request waits behind the first: same lane, arrival order.
        assert started.count("slow") == 1
        release.set()
        third, fourth = await harness.read_n(2)
        assert [third["id"], fourth["id"]] == [1, 2]
        await harness.eof()
        await harness.wait_finished()


async def test_an_unexpected_handler_failure_is_an_internal_error_without_details(
    engine: Brain,
) -> None:
    async def broken(ctx: Context, params: Any) -> dict[str, Any]:
        raise RuntimeError("secret internal detail")

    handlers = dict(HANDLERS)
    handlers["info"] = Handler(broken, lambda p: None)
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers)
        await harness.write({"id": 1, "method": "info"}, {"id": 2, "method": "ping"})
        frames = {f["id"]: f for f in await harness.read_n(2)}
        assert frames[1]["error"] == {"code": -32603, "message": "internal error"}
        assert frames[2]["result"] == {"pong": True}
        await harness.eof()
        await harness.wait_finished()


async def test_shutdown_answers_in_flight_requests_first_and_refuses_later_lines(
    engine: Brain,
) -> None:
    release = anyio.Event()

    async def held_info(ctx: Context, params: Any) -> dict[str, Any]:
        await release.wait()
        return {"held": True}

    handlers = dict(HANDLERS)
    handlers["info"] = Handler(held_info, lambda p: None)
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers)
        await harness.write(
            {"id": 1, "method": "info"},
            {"id": 2, "method": "shutdown"},
            {"id": 3, "method": "ping"},
        )
        refused = await harness.read()
        assert refused["id"] == 3
        assert refused["error"]["code"] == -32006
        release.set()
        held, done = await harness.read_n(2)
        assert held == {"id": 1, "result": {"held": True}}
        assert done["id"] == 2
        assert done["result"]["ok"] is True
        await harness.wait_finished()
        assert harness.server.stop_reason == "shutdown"


async def test_stop_finishes_in_flight_work_and_returns(engine: Brain) -> None:
    release = anyio.Event()

    async def held_info(ctx: Context, params: Any) -> dict[str, Any]:
        await release.wait()
        return {"held": True}

    handlers = dict(HANDLERS)
    handlers["info"] = Handler(held_info, lambda p: None)
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers)
        await harness.write({"id": 1, "method": "info"})
        await anyio.wait_all_tasks_blocked()
        harness.server.stop("SIGTERM")
        release.set()
        assert await harness.read() == {"id": 1, "result": {"held": True}}
        await harness.wait_finished()
        assert harness.server.stop_reason == "SIGTERM"


async def test_shutdown_is_answered_after_the_bound_when_a_request_never_finishes(
    engine: Brain,
) -> None:
    async def stuck_info(ctx: Context, params: Any) -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    handlers = dict(HANDLERS)
    handlers["info"] = Handler(stuck_info, lambda p: None)
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers, shutdown_timeout_s=0.1)
        await harness.write({"id": 1, "method": "info"}, {"id": 2, "method": "shutdown"})
        stuck, done = await harness.read_n(2)
        assert stuck["id"] == 1
        assert stuck["error"]["code"] == -32006
        assert stuck["error"]["data"] == {"abandoned": True}
        assert done["id"] == 2
        assert done["result"]["ok"] is True
        assert done["result"]["abandoned"] == 1
        assert done["result"]["saved"]["checkpointed_frames"] >= 0  # the flush ran
        await harness.wait_finished()


async def test_a_request_waiting_behind_a_stuck_one_is_refused_not_abandoned(
    engine: Brain,
) -> None:
    async def stuck_ingest(ctx: Context, params: IngestParams) -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    handlers = dict(HANDLERS)
    handlers["ingest"] = Handler(stuck_ingest, lambda p: f"session:{p.session}", mutates=True)
    message = {"role": "user", "content": "x"}
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers, shutdown_timeout_s=0.1)
        await harness.write(
            *(
                {"id": i, "method": "ingest", "params": {"session": "s", "message": message}}
                for i in (1, 2)
            )
        )
        await anyio.wait_all_tasks_blocked()
        harness.server.stop("SIGTERM")
        frames = {f["id"]: f for f in await harness.read_n(2)}
        assert frames[1]["error"]["data"] == {"abandoned": True}
        assert frames[2]["error"] == {"code": -32006, "message": "shutting down"}
        await harness.wait_finished()


async def test_reading_pauses_while_queued_requests_hold_more_bytes_than_the_bound(
    engine: Brain,
) -> None:
    release = anyio.Event()
    started: list[str] = []

    async def held_ingest(ctx: Context, params: IngestParams) -> dict[str, Any]:
        started.append(params.session)
        await release.wait()
        return {"session": params.session}

    handlers = dict(HANDLERS)
    handlers["ingest"] = Handler(held_ingest, lambda p: f"session:{p.session}", mutates=True)
    big = {"role": "user", "content": "x" * 100_000}
    async with anyio.create_task_group() as tg:
        harness = await start(tg, engine, handlers=handlers, max_queued_request_bytes=250_000)
        for i in range(10):  # one request a chunk, each on its own lane
            await harness.write(
                {"id": i, "method": "ingest", "params": {"session": f"s{i}", "message": big}}
            )
        await anyio.wait_all_tasks_blocked()
        # Two lines of ~100 kB are held; the third would pass 250 kB: it stays unread.
        assert started == ["s0", "s1"]
        assert harness.source._recv.statistics().current_buffer_used == 7
        assert harness.server.pauses == 1
        release.set()
        frames = await harness.read_n(10)
        assert sorted(f["id"] for f in frames) == list(range(10))
        await harness.eof()
        await harness.wait_finished()


async def test_eof_without_final_newline_still_answers_the_last_line(running: Harness) -> None:
    await running.write(b'{"id": 1, "method": "ping"}')
    await running.eof()
    assert await running.read() == {"id": 1, "result": {"pong": True}}
    await running.wait_finished()


async def test_grep_finds_an_ingested_message_through_the_protocol(running: Harness) -> None:
    message = {"id": "m1", "role": "user", "content": "the staging database migration failed"}
    await running.write(
        {"id": 1, "method": "ingest", "params": {"session": "g", "message": message}}
    )
    await running.read()
    await running.write(
        {"id": 2, "method": "grep", "params": {"query": "migration", "session": "g"}},
        {"id": 3, "method": "grep", "params": {"query": "x", "mode": "semantic", "all": True}},
        {"id": 4, "method": "grep", "params": {"query": "x", "mode": "vector", "all": True}},
    )
    frames = {f["id"]: f for f in await running.read_n(3)}
    hits = frames[2]["result"]["hits"]
    assert [(h["kind"], h["id"]) for h in hits] == [("message", "m1")]
    assert frames[3]["result"]["pending"] in (0, 1)  # answers from what is embedded so far
    assert frames[4]["error"]["code"] == -32602
    assert frames[4]["error"]["message"].startswith("params.mode")


async def test_a_params_parser_that_fails_unexpectedly_costs_one_internal_error_not_the_daemon(
    running: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken(NoParams):
        @classmethod
        def from_obj(cls, obj: object) -> NoParams:
            raise AssertionError("params.x is read but not among the known fields")

    monkeypatch.setitem(METHODS, "info", MethodSpec(Broken, "broken for the test"))
    await running.write({"id": 1, "method": "info"}, {"id": 2, "method": "ping"})
    answers = {a["id"]: a for a in await running.read_n(2)}
    assert answers[1]["error"]["code"] == -32603
    assert answers[2] == {"id": 2, "result": {"pong": True}}
