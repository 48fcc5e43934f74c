"""The clients against a real daemon subprocess."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import anyio
import pytest

from protocol import AsyncClient, Client
from protocol.errors import InvalidParams, MethodNotFound, ScopeDenied


def test_sync_client_calls_and_raises_typed_errors(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "c.db", stderr=subprocess.DEVNULL) as client:
        assert client.call("ping") == {"pong": True}
        with pytest.raises(MethodNotFound):
            client.call("nope")
        with pytest.raises(InvalidParams, match=r"params\.session"):
            client.call("ingest", {"message": {"role": "user", "content": "x"}})
        assert client.close() == 0


def test_sync_client_is_safe_to_share_between_threads(tmp_path: Path) -> None:
    results: dict[int, object] = {}
    with Client.spawn(tmp_path / "t.db", stderr=subprocess.DEVNULL) as client:

        def work(n: int) -> None:
            message = {"id": f"m{n}", "role": "user", "content": f"message {n}"}
            results[n] = client.call("ingest", {"session": f"s{n % 3}", "message": message})

        threads = [threading.Thread(target=work, args=(n,)) for n in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert client.call("info")["messages"] == 24
    assert sorted(results) == list(range(24))


def test_async_client_calls_and_the_daemon_exits_cleanly_at_eof(tmp_path: Path) -> None:
    async def main() -> int | None:
        async with AsyncClient.spawn(tmp_path / "a.db") as client:
            assert await client.call("ping") == {"pong": True}
            message = {"role": "user", "content": "hello"}
            result = await client.call("ingest", {"session": "s", "message": message})
            assert result["ingested"] == 1
            with pytest.raises(MethodNotFound):
                await client.call("nope")
        return client.returncode

    assert anyio.run(main) == 0


def test_sync_client_carries_a_grant_that_the_daemon_enforces(tmp_path: Path) -> None:
    with Client.spawn(tmp_path / "g.db", stderr=subprocess.DEVNULL) as client:
        message = {"role": "user", "content": "only this session"}
        client.call("ingest", {"session": "mine", "message": message})
        client.call("ingest", {"session": "theirs", "message": message})
        grant = client.call(
            "grant", {"sessions": ["mine"], "methods": ["grep"], "token_cap": 10_000, "ttl_s": 60}
        )["grant_id"]
        hits = client.call("grep", {"query": "session", "session": "mine"}, grant=grant)["hits"]
        assert [h["session"] for h in hits] == ["mine"]
        with pytest.raises(ScopeDenied):
            client.call("grep", {"query": "session", "session": "theirs"}, grant=grant)


def _shadowing_checkout(root: Path) -> Path:
    """A host's working directory holding folders named like the packages (a clone)."""
    for package in ("brain", "daemon", "protocol"):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
    return root


def test_sync_client_works_from_a_directory_holding_brain_and_daemon_folders(
    tmp_path: Path,
) -> None:
    host = _shadowing_checkout(tmp_path / "host")
    log = tmp_path / "daemon.log"
    with (
        log.open("wb") as stderr,
        Client.spawn(tmp_path / "s.db", stderr=stderr, cwd=host) as client,
    ):
        message = {"role": "user", "content": "spawned beside a clone"}
        assert client.call("ingest", {"session": "s", "message": message})["ingested"] == 1
        assert client.close() == 0
    assert b"cannot import" not in log.read_bytes()


def test_async_client_works_from_a_directory_holding_brain_and_daemon_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(_shadowing_checkout(tmp_path / "host"))

    async def main() -> int | None:
        async with AsyncClient.spawn(tmp_path / "a.db", stderr=subprocess.DEVNULL) as client:
            assert await client.call("ping") == {"pong": True}
        return client.returncode

    assert anyio.run(main) == 0


def test_client_logs_go_to_the_stderr_given_to_spawn(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    with log.open("wb") as stderr, Client.spawn(tmp_path / "l.db", stderr=stderr) as client:
        client.call("ping")
        assert client.close() == 0
    assert log.read_bytes()  # the daemon's start/stop lines landed in the file
