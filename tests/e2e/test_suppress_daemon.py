"""Suppression through a real daemon reaches every summary: one being made while the
message is suppressed (the LLM summarizer held on a loopback server until the
suppression is acknowledged), and ones made before it (withheld at once, rebuilt
in the background, restored by unsuppress)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from protocol import Client
from tests.e2e.conftest import DEADLINE, opened
from tests.openai_server import OpenAIServer, Recorded, Reply

SECRET = "QX7ZEBRA4471"


def _conversation(n: int, secret_at: int) -> list[dict[str, Any]]:
    out = [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"routine status update number {i} about the build pipeline and its caches "
            "with nothing else worth keeping in mind for later",
        }
        for i in range(n)
    ]
    out[secret_at]["content"] = f"the deploy key {SECRET} opens production"
    return out


class _FaithfulLLM(OpenAIServer):
    """Summarises like a faithful model (the secret comes out only if it went in); the
    first request is held until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def _take(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            first = not self.entered.is_set()
            self.entered.set()
        if first:
            self.release.wait(DEADLINE)
        fed = SECRET in request.body.decode()
        return Reply.text(
            f"Build pipeline status updates{f'; deploy key {SECRET}' if fed else ''}."
        )


def _seen(client: Client) -> str:
    """What agent-facing calls show of the session."""
    out = [json.dumps(client.call("assemble", {"session": "s", "budget": 100_000}))]
    for mode in ("full_text", "regex", "semantic", "hybrid"):
        hits = client.call("grep", {"session": "s", "query": SECRET, "mode": mode, "limit": 100})[
            "hits"
        ]
        out.append(json.dumps(hits))
        for hit in hits:
            if hit["kind"] == "summary":
                out.append(json.dumps(client.call("describe", {"id": hit["id"], "session": "s"})))
                out.append(json.dumps(client.call("expand", {"id": hit["id"], "session": "s"})))
    return "\n".join(out)


def _small(*extra: str) -> list[str]:
    return [
        "--auto-compact", "false", "--fresh-tail-count", "4", "--leaf-chunk-tokens", "300",
        *extra,
    ]  # fmt: skip


def test_a_message_suppressed_while_the_llm_summarises_it_reaches_no_summary(
    tmp_path: Path,
) -> None:
    with (
        _FaithfulLLM() as llm,
        Client.spawn(
            tmp_path / "race.db", args=_small("--llm-base-url", llm.base_url, "--llm-model", "m")
        ) as client,
    ):
        client.call("ingest", {"session": "s", "messages": _conversation(40, secret_at=2)})
        compacted: list[Any] = []
        compacting = threading.Thread(
            target=lambda: compacted.append(client.call("compact", {"session": "s"}))
        )
        compacting.start()
        assert llm.entered.wait(DEADLINE)  # the chunk holding m2 is with the model now
        assert client.call("suppress", {"session": "s", "ids": ["m2"]})["suppressed"] == ["m2"]
        llm.release.set()
        compacting.join(DEADLINE)
        assert compacted
        assert compacted[0]["summaries"]
        assert SECRET not in _seen(client)
        assert client.close() == 0


def test_summaries_made_before_a_suppression_are_withheld_at_once_and_rebuilt_in_the_background(
    tmp_path: Path,
) -> None:
    with Client.spawn(tmp_path / "before.db", args=_small()) as client:
        client.call("ingest", {"session": "s", "messages": _conversation(40, secret_at=2)})
        assert client.call("compact", {"session": "s"})["summaries"]
        before = client.call("assemble", {"session": "s", "budget": 100_000})
        assert SECRET in json.dumps(before)
        assert SECRET in json.dumps(
            client.call("grep", {"session": "s", "query": SECRET, "scope": "summaries"})
        )

        client.call("suppress", {"session": "s", "ids": ["m2"]})
        assert SECRET not in _seen(client)  # at once: no waiting for the rebuild
        deadline = time.monotonic() + DEADLINE
        while 'withheld=\\"true\\"' in json.dumps(
            client.call("assemble", {"session": "s", "budget": 100_000})
        ):
            assert time.monotonic() < deadline, "the withheld summary was never rebuilt"
            time.sleep(0.05)
        assert SECRET not in _seen(client)
        assert "pipeline" in json.dumps(
            client.call("grep", {"session": "s", "query": "pipeline", "scope": "summaries"})
        )

        client.call("unsuppress", {"session": "s", "ids": ["m2"]})
        assert client.call("assemble", {"session": "s", "budget": 100_000}) == before
        assert client.close() == 0


def test_a_suppression_by_another_process_is_withheld_by_the_daemon_and_rebuilt_by_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "other.db"
    with Client.spawn(db, args=_small()) as client:
        client.call("ingest", {"session": "s", "messages": _conversation(40, secret_at=2)})
        assert client.call("compact", {"session": "s"})["summaries"]
        with opened(db) as other:  # e.g. `brain call suppress` from a shell
            other.suppress(["m2"], session="s")
        assert SECRET not in _seen(client)
        deadline = time.monotonic() + DEADLINE
        while client.call("assemble", {"session": "s", "budget": 100_000})["withheld"]:
            assert time.monotonic() < deadline, "the daemon never rebuilt the withheld summary"
            time.sleep(0.05)
        assert SECRET not in _seen(client)
        assert client.close() == 0
