"""Security properties of a real daemon: no read crosses a session's or a
grant's scope, file ids cannot reach outside the files directory, configured
API keys never appear in answers or logs, and the daemon listens on no network
socket of its own."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest

from protocol.framing import encode_frame
from tests.e2e.conftest import Daemon, Spawn, serve_argv
from tests.reliability.conftest import sql_rows

SECRET = "zebracorn"  # a word only the other session's messages contain
READS = ("describe", "expand", "expand_query", "grep", "assemble", "recent")


def _seed(daemon: Daemon, db: Path) -> dict[str, str]:
    """Two sessions; the ``theirs`` one holds a message, a payload file, a summary and
    a day rollup."""
    mine = [{"id": f"a{i}", "role": "user", "content": f"my own note {i}"} for i in range(5)]
    theirs = [
        {"id": f"b{i}", "role": "user", "content": f"{SECRET} private fact number {i} " * 20}
        for i in range(60)
    ]
    theirs.append(
        {
            "id": "big",
            "role": "tool",
            "tool_call_id": "c1",
            "content": f"{SECRET} payload " * 2_000,
        }
    )
    assert "result" in daemon.call(1, "ingest", {"session": "mine", "messages": mine})
    stored = daemon.call(2, "ingest", {"session": "theirs", "messages": theirs})["result"]
    summary = daemon.call(3, "compact", {"session": "theirs", "target_tokens": 100})["result"]
    assert summary["summaries"], summary
    (file_id,) = sql_rows(db, "SELECT file_id FROM large_files")[0]
    window = {"session": "theirs", "since": "2000-01-01T00:00:00Z"}
    recent = daemon.call(4, "recent", window)["result"]["items"]
    rollup = next(i["id"] for i in recent if i["kind"] == "rollup")
    return {
        "message": stored["ids"][0],
        "generated": "msg_1",
        "summary": summary["summaries"][0],
        "file": file_id,
        "rollup": rollup,
    }


def _reads(ids: dict[str, str], scope: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for target in ids.values():
        calls.append(("describe", {"id": target, **scope}))
        calls.append(("expand", {"id": target, **scope}))
    calls.append(("expand_query", {"prompt": SECRET, "summary_ids": [ids["summary"]], **scope}))
    calls.append(("expand_query", {"prompt": SECRET, "query": SECRET, **scope}))
    for mode in ("full_text", "regex", "semantic", "hybrid"):
        for where in ("both", "files"):
            calls.append(("grep", {"query": SECRET, "mode": mode, "scope": where, **scope}))
    calls.append(("assemble", {"budget": 100_000, **scope}))
    calls.append(("recent", {"since": "2000-01-01T00:00:00Z", **scope}))
    calls.append(("query", {"query": SECRET}))  # the graph is shared by design: not scoped
    return [(m, p) for m, p in calls if m != "query"]


def _leaks(frame: dict[str, Any]) -> bool:
    return SECRET in orjson.dumps(frame).decode()


def test_no_read_method_reaches_another_sessions_items(tmp_path: Path, spawn: Spawn) -> None:
    daemon = spawn(serve_argv(tmp_path / "brain.db", "--large-payload-tokens", "500"))
    ids = _seed(daemon, tmp_path / "brain.db")
    for n, (method, params) in enumerate(_reads(ids, {"session": "mine"})):
        frame = daemon.call(100 + n, method, params)
        assert not _leaks(frame), (method, params, frame)
        if "error" in frame:
            assert frame["error"]["code"] in (-32001, -32003, -32602), (method, params, frame)


def test_a_grant_reads_nothing_outside_its_sessions(tmp_path: Path, spawn: Spawn) -> None:
    daemon = spawn(serve_argv(tmp_path / "brain.db", "--large-payload-tokens", "500"))
    ids = _seed(daemon, tmp_path / "brain.db")
    grant = daemon.call(
        9,
        "grant",
        {"sessions": ["mine"], "methods": list(READS), "token_cap": 10_000_000, "ttl_s": 600},
    )["result"]["grant_id"]
    scopes: list[dict[str, Any]] = [{"session": "mine"}, {"session": "theirs"}, {"all": True}]
    n = 100
    for scope in scopes:
        for method, params in _reads(ids, scope):
            n += 1
            line = {"id": n, "method": method, "params": params, "grant": grant}
            daemon.send(encode_frame(line))
            frame = daemon.frame()
            assert frame["id"] == n
            assert not _leaks(frame), (method, params, frame)
            if scope.get("session") == "theirs":
                assert frame["error"]["code"] == -32003, (method, params, frame)
            elif "all" in scope:  # assemble takes no all: refused as invalid first
                assert frame["error"]["code"] in (-32003, -32602), (method, params, frame)
    ungranted = {"id": 1, "method": "info", "grant": grant}
    daemon.send(encode_frame(ungranted))
    assert daemon.frame()["error"]["code"] == -32003


def test_file_ids_cannot_reach_outside_the_files_directory(tmp_path: Path, spawn: Spawn) -> None:
    db = tmp_path / "brain.db"
    outside = tmp_path / "outside.txt"
    outside.write_text("root:x:0:0 outside secret\n")
    daemon = spawn(serve_argv(db, "--large-payload-tokens", "500"))
    ids = _seed(daemon, tmp_path / "brain.db")
    files_dir = tmp_path / "brain.db-files"
    planted = "file_" + "a" * 16  # a well-formed id with no row, symlinked outside
    (files_dir / planted).symlink_to(outside)
    known = files_dir / ids["file"]
    hostile = [
        "file_../../etc/passwd",
        "file_../outside.txt",
        f"file_{'0' * 16}/../../outside.txt",
        "../outside.txt",
        "/etc/passwd",
        str(outside),
        "file_%2e%2e%2foutside.txt",
        f"{ids['file']}/../../outside.txt",
        planted,
        f"{ids['file']}\x00../../outside.txt",
    ]
    for n, target in enumerate(hostile):
        for scope in ({"session": "theirs"}, {"all": True}):
            frame = daemon.call(100 + n, "describe", {"id": target, **scope})
            text = orjson.dumps(frame).decode()
            assert "outside secret" not in text, (target, frame)
            assert "root:" not in text, (target, frame)
            assert frame["error"]["code"] in (-32001, -32602), (target, frame)
    assert known.exists()
    assert daemon.finish()[0] == 0


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on exit: nothing listens there


def test_api_keys_never_appear_in_answers_or_logs_when_providers_fail(
    tmp_path: Path, spawn: Spawn
) -> None:
    llm_key, embed_key = "sk-llm-" + os.urandom(12).hex(), "sk-embed-" + os.urandom(12).hex()
    base = f"http://127.0.0.1:{_dead_port()}/v1"
    daemon = spawn(
        serve_argv(
            tmp_path / "brain.db",
            "--log-level", "debug",
            "--llm-base-url", base, "--llm-model", "m", "--llm-api-key", llm_key,
            "--llm-timeout-s", "1",
            "--embedder", "openai", "--embed-base-url", base, "--embed-model", "m",
            "--embed-api-key", embed_key, "--embed-timeout-s", "1",
        )
    )  # fmt: skip
    messages = [{"role": "user", "content": f"note {i} " * 50} for i in range(40)]
    frames = [daemon.call(1, "ingest", {"session": "s", "messages": messages})]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("grep", {"query": "note", "mode": "semantic", "all": True}),
        ("grep", {"query": "note", "mode": "hybrid", "all": True}),
        ("compact", {"session": "s", "target_tokens": 100}),
        ("expand_query", {"prompt": "note", "query": "note", "all": True}),
        ("query", {"query": "note"}),
        ("teach", {"content": "a fact"}),
        ("info", {}),
    ]
    for n, (method, params) in enumerate(calls):
        frames.append(daemon.call(10 + n, method, params))
    assert any(f.get("error", {}).get("code") == -32007 for f in frames), frames
    exit_code, rest = daemon.finish()
    assert exit_code == 0
    text = orjson.dumps(frames + rest).decode() + daemon.stderr()
    assert llm_key not in text
    assert embed_key not in text
    assert llm_key[7:] not in text  # nor their random parts
    assert embed_key[9:] not in text


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    return inodes


@pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="needs Linux /proc")
def test_the_daemon_opens_no_network_socket_while_it_serves(tmp_path: Path, spawn: Spawn) -> None:
    daemon = spawn(serve_argv(tmp_path / "brain.db", "--large-payload-tokens", "500"))
    ids = _seed(daemon, tmp_path / "brain.db")
    assert daemon.call(5, "grep", {"query": "note", "mode": "hybrid", "all": True})["result"]
    assert daemon.call(6, "describe", {"id": ids["summary"], "session": "theirs"})["result"]
    pid = daemon.proc.pid
    inodes = _socket_inodes(pid)
    network = []
    for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for row in path.read_text().splitlines()[1:]:
            fields = row.split()
            if fields[9] in inodes:
                network.append((table, fields[1], fields[3]))
    assert network == []
    unix = {r.split()[6] for r in Path(f"/proc/{pid}/net/unix").read_text().splitlines()[1:]}
    assert inodes <= unix, f"sockets that are not unix sockets: {sorted(inodes - unix)}"
    assert daemon.finish()[0] == 0
