"""brain.store.readpool: reads never wait for writers, never see half a write."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from brain import Brain, BrainConfig, MessageIn, NotFound, open_store
from brain.graph.mirror import Graph
from brain.graph.nodes import EdgeWrite, NewNode
from brain.lcm.assemble import AssembleOptions
from brain.recall.search import GrepOptions
from brain.store.connection import Store
from brain.store.readpool import ReadPool
from brain.vectors.embedders import HashEmbedder

WAIT_S = 60.0  # generous: only reached when the behaviour under test is missing


@pytest.fixture
def engine(db_path: Path) -> Iterator[Brain]:
    """An engine with a deterministic embedder, so queries need no model files."""
    opened = Brain(db_path, BrainConfig(), embedder=HashEmbedder(64))
    try:
        yield opened
    finally:
        opened.close()


class HeldCommit:
    """Holds the engine's next commit: the write is applied, its lock held, not yet committed.

    A tracer on the write connection blocks on the ``COMMIT`` statement until
    ``release``; ``holding`` is set once a write reached it.
    """

    def __init__(self, store: Store) -> None:
        self.holding = threading.Event()
        self.released = threading.Event()
        self._store = store
        store.set_tracer(self._trace)

    def _trace(self, sql: str, _bindings: Any) -> None:
        if sql.strip().upper() == "COMMIT" and not self.released.is_set():
            self.holding.set()
            self.released.wait(WAIT_S)

    def release(self) -> None:
        self.released.set()
        self._store.set_tracer(None)


def _in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # reported by the test, not lost in the thread
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def _grep_hits(engine: Brain, word: str) -> int:
    return len(engine.grep(GrepOptions(query=word, limit=1_000), session="s"))


# -- the engine: readers beside a writer -----------------------------------------------------


def test_reads_are_answered_while_a_write_holds_the_write_path_and_see_none_of_it(
    engine: Brain,
) -> None:
    engine.ingest("s", [MessageIn("user", "the heron nests by the lake", client_id="m1")])
    engine.teach(NewNode("teaching", "herons nest by lakes"))
    # The session follows this budget from now on: later assembles with it write nothing.
    engine.assemble("s", AssembleOptions(budget=10_000))
    before = engine.info()
    held = HeldCommit(engine.store)
    writer, wrote = _in_thread(
        lambda: engine.ingest("s", [MessageIn("user", "a kestrel hovers", client_id="m2")])
    )
    try:
        assert held.holding.wait(WAIT_S), "the ingest never reached its commit"

        def reads() -> dict[str, Any]:
            return {
                "info": engine.info(),
                "old": _grep_hits(engine, "heron"),
                "new": _grep_hits(engine, "kestrel"),
                "assemble": engine.assemble("s", AssembleOptions(budget=10_000)),
                "describe": engine.describe("m1", session="s"),
                "message": engine.get_message("s", "m1"),
                "expand": engine.expand_query("where do herons nest?", session="s"),
                "query": engine.query("heron", record=False),
            }

        reader, read = _in_thread(reads)
        reader.join(WAIT_S)
        answered_while_held = not reader.is_alive()
        assert writer.is_alive()  # still holding: it waits for the release
    finally:
        held.release()
        writer.join(WAIT_S)
    assert answered_while_held, "the reads waited for the write to commit"
    assert "error" not in read, read.get("error")
    got = read["value"]
    assert got["info"].messages == before.messages  # none of the uncommitted write
    assert (got["old"], got["new"]) == (1, 0)
    assert [m["content"] for m in got["assemble"].messages] == ["the heron nests by the lake"]
    assert got["message"]["content"] == "the heron nests by the lake"
    assert got["query"].fired
    assert "error" not in wrote, wrote.get("error")
    assert _grep_hits(engine, "kestrel") == 1  # committed now: the next read sees it


def test_a_query_records_its_trace_while_another_write_is_not_disturbed(engine: Brain) -> None:
    engine.teach(NewNode("teaching", "herons nest by lakes"))
    result = engine.query("heron", chat_id="c1")
    assert engine.trace(chat_id="c1")["trace_id"] == result.trace_id


def test_assemble_remembers_a_new_budget_on_the_write_path(engine: Brain) -> None:
    engine.ingest("s", [MessageIn("user", "hello")])
    first = engine.assemble("s", AssembleOptions(budget=5_000))
    again = engine.assemble("s", AssembleOptions(budget=5_000))
    assert (first.budget_changed, again.budget_changed) == (True, False)


BATCH = 5


def test_concurrent_readers_see_every_ingest_whole_or_not_at_all(engine: Brain) -> None:
    """Each ingest of ``BATCH`` messages is one transaction: no read may see part of one."""
    stop = threading.Event()
    seen: list[tuple[str, int]] = []

    def write() -> None:
        try:
            for n in range(40):
                batch = [MessageIn("user", f"plover note {n} {i}") for i in range(BATCH)]
                engine.ingest("s", batch)
        finally:
            stop.set()

    def read() -> None:
        while not stop.is_set():
            seen.append(("info", engine.info().messages))
            try:
                seen.append(("grep", _grep_hits(engine, "plover")))
            except NotFound:  # before the first ingest the session does not exist: none seen
                seen.append(("grep", 0))
            assembled = engine.assemble("s", AssembleOptions(budget=1_000_000))
            seen.append(("assemble", len(assembled.messages)))

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 4)
    assert seen
    torn = [(what, count) for what, count in seen if count % BATCH]
    assert not torn, f"reads saw part of an ingest: {torn[:5]}"
    assert engine.info().messages == 40 * BATCH


def test_queries_beside_teaching_never_see_a_node_without_its_links(engine: Brain) -> None:
    """A taught node and its edges land in one swap of the mirror, read whole by queries."""
    anchor = engine.teach(NewNode("teaching", "grebes dive for fish")).node_id
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for n in range(30):
                engine.teach(NewNode("teaching", f"grebe fact {n}"), links=[anchor])
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()

    def read() -> None:
        try:
            while not stop.is_set():
                engine.query("grebe", record=False)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 4)
    assert not errors, errors


# -- the mirror: whole states ------------------------------------------------------------------


def test_a_mirror_state_never_changes_once_taken_and_writes_land_whole(db_path: Path) -> None:
    store = open_store(db_path)
    try:
        graph = Graph()
        start = graph.refresh(store)
    finally:
        store.close()
    assert start.epoch is not None
    stop = threading.Event()
    torn: list[tuple[int | None, int]] = []

    def write() -> None:
        try:
            for n in range(300):
                epoch = start.epoch + n
                edges = [EdgeWrite(n, 10_000 + k, 0.5, "learned") for k in range(BATCH)]
                assert graph.apply(epoch, epoch + 1, edges=edges)
        finally:
            stop.set()

    def read() -> None:
        while not stop.is_set():
            state = graph.snapshot()
            total = sum(len(t) for t in state.out.values())
            assert state.epoch is not None
            if total != (state.epoch - start.epoch) * BATCH:
                torn.append((state.epoch, total))
            if sum(len(t) for t in state.out.values()) != total:  # changed under the reader
                torn.append((state.epoch, -1))

    threads = [threading.Thread(target=write)] + [threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not torn, torn[:5]
    assert sum(len(t) for t in start.out.values()) == 0  # the first state is as it was


def test_a_write_applied_to_a_stale_mirror_marks_it_for_a_reload(db_path: Path) -> None:
    store = open_store(db_path)
    try:
        graph = Graph()
        epoch = graph.refresh(store).epoch
        assert epoch is not None
        assert not graph.apply(epoch + 1, epoch + 2, edges=[EdgeWrite(1, 2, 0.5, "learned")])
        assert graph.snapshot().epoch is None
        assert graph.refresh(store).epoch == epoch
    finally:
        store.close()


# -- the pool -------------------------------------------------------------------------------


@pytest.fixture
def pool(db_path: Path) -> Iterator[ReadPool]:
    open_store(db_path).close()
    opened = ReadPool(lambda: open_store(db_path, create=False), 2)
    try:
        yield opened
    finally:
        opened.close()


def test_a_pooled_connection_refuses_writes(pool: ReadPool) -> None:
    with pool.read() as store, pytest.raises(apsw.ReadOnlyError):
        store.execute("INSERT INTO meta (key, value) VALUES ('x', 'y')")


def test_a_read_sees_one_snapshot_whatever_commits_meanwhile(pool: ReadPool, db_path: Path) -> None:
    writer = open_store(db_path)
    try:
        with pool.read() as store:
            before = store.scalar("SELECT count(*) FROM meta")
            with writer.transaction():
                writer.execute("INSERT INTO meta (key, value) VALUES ('reader-test', '1')")
            assert store.scalar("SELECT count(*) FROM meta") == before
        with pool.read() as store:
            assert store.scalar("SELECT count(*) FROM meta") == before + 1
    finally:
        writer.close()


def test_a_connection_goes_back_to_the_pool_after_a_failed_read(pool: ReadPool) -> None:
    lent: list[Store] = []

    def failing_read() -> None:
        with pool.read() as store:
            lent.append(store)
            raise LookupError("the read failed, not the connection")

    with pytest.raises(LookupError):
        failing_read()
    loan = pool.read_idle()  # the one idle connection (``read`` would open another)
    assert loan is not None
    with loan as store:
        assert store is lent[0]


def test_a_reader_past_the_pool_size_waits_for_a_connection_to_come_back(
    pool: ReadPool,
) -> None:
    got = threading.Event()

    def third_read() -> None:
        with pool.read():
            got.set()

    with pool.read() as one, pool.read() as two:
        third, _ = _in_thread(third_read)
        assert not got.wait(0.2)  # both lent: the third waits
    third.join(WAIT_S)
    assert got.is_set()
    assert one is not two


def test_a_reset_retires_every_connection(pool: ReadPool) -> None:
    with pool.read() as lent:
        pool.reset()
    with pool.read() as store:
        assert store is not lent


def test_an_idle_loan_is_refused_rather_than_waited_for_or_opened(pool: ReadPool) -> None:
    assert pool.read_idle() is None  # nothing opened yet: it would open one
    with pool.read(), pool.read():
        assert pool.read_idle() is None  # both lent: it would wait
    loan = pool.read_idle()
    assert loan is not None
    with loan as store:
        assert store.scalar("SELECT count(*) FROM meta") is not None
    pool.close()
    assert pool.read_idle() is None


def test_a_read_leaves_the_last_idle_connection_to_an_idle_loan(pool: ReadPool) -> None:
    with pool.read() as first:
        pass  # opened, then idle again
    # A background read (the embedding worker looking at a queue) while info asks for
    # an idle connection: the read opens another rather than take the only idle one.
    with pool.read() as reading:
        assert reading is not first
        loan = pool.read_idle()
        assert loan is not None
        with loan as store:
            assert store is first
    # Once size connections are open, a read takes an idle one as before.
    with pool.read() as one, pool.read() as two:
        assert {one, two} == {first, reading}
        assert pool.read_idle() is None


def test_info_now_answers_from_an_idle_connection_while_a_write_holds_the_lock(
    engine: Brain,
) -> None:
    engine.ingest("s", [MessageIn("user", "a heron waits", client_id="m1")])
    assert engine.info().messages == 1  # opens the pool's first connection
    held = HeldCommit(engine.store)
    writer, _wrote = _in_thread(
        lambda: engine.ingest("s", [MessageIn("user", "a kestrel hovers", client_id="m2")])
    )
    try:
        assert held.holding.wait(WAIT_S), "the ingest never reached its commit"
        now = engine.info_now()  # the write lock is held: it must neither wait nor see it
        assert now is not None
        assert now.messages == 1
    finally:
        held.release()
        writer.join(WAIT_S)
    now = engine.info_now()
    assert now is not None
    assert now.messages == 2


def test_info_now_defers_to_info_without_a_read_pool(db_path: Path) -> None:
    engine = Brain(db_path, BrainConfig(read_connections=0))
    try:
        engine.ingest("s", [MessageIn("user", "a heron waits", client_id="m1")])
        assert engine.info_now() is None
        assert engine.info().messages == 1
    finally:
        engine.close()
