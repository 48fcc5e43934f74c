"""Drive a short agent session through a real ``brain serve`` child over stdio.

Shows each request and its answer: a conversation in OpenAI and Anthropic
shapes (with a tool call and its result), an idempotent replay, a large tool
output moved to a payload file, a bad request answered with an error, then
``info``, ``save`` and ``shutdown``. Finally it reopens the database with the
engine library and restores one message exactly as it was sent.

Usage: python scripts/demo.py [--db PATH]   (default ./.demo/brain.db or $BRAIN_DB)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson

from brain import Brain
from protocol import Client, RPCError


def show(label: str, request: dict[str, Any], response: dict[str, Any]) -> None:
    """Print one exchange compactly."""
    req = orjson.dumps(request).decode()
    res = orjson.dumps(response).decode()
    print(f"\n# {label}")
    print("  -> " + textwrap.shorten(req, 220, placeholder=" ..."))
    print("  <- " + textwrap.shorten(res, 220, placeholder=" ..."))


def main() -> int:
    """Run the demo; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("BRAIN_DB") or str(Path(".demo") / "brain.db")
    parser.add_argument("--db", default=default)
    args = parser.parse_args()
    db = Path(args.db)
    print(f"brain demo: daemon on {db} (stdio, NDJSON)")

    session = "demo-session"
    big_output = "\n".join(f"line {i}: build log output ..." for i in range(12_000))
    turns: list[tuple[str, dict[str, Any]]] = [
        ("liveness", {"method": "ping"}),
        (
            "a user turn and an assistant tool call (OpenAI shape)",
            {
                "method": "ingest",
                "params": {
                    "session": session,
                    "messages": [
                        {
                            "id": "u1",
                            "role": "user",
                            "content": "Deploy failed on staging at 14:02, can you check the log?",
                            "created_at": "2026-11-22T14:03:00Z",
                        },
                        {
                            "id": "a1",
                            "role": "assistant",
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {
                                        "name": "read_log",
                                        "arguments": '{"env":"staging"}',
                                    },
                                }
                            ],
                        },
                    ],
                },
            },
        ),
        (
            "a ~380 KB tool result goes to a payload file; the message keeps a reference",
            {
                "method": "ingest",
                "params": {
                    "session": session,
                    "message": {
                        "id": "t1",
                        "role": "tool",
                        "tool_call_id": "call_1",
                        "content": big_output,
                    },
                },
            },
        ),
        (
            "the assistant answers (Anthropic blocks, with reasoning)",
            {
                "method": "ingest",
                "params": {
                    "session": session,
                    "message": {
                        "id": "a2",
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": "The log shows a missing env var."},
                            {"type": "text", "text": "DATABASE_URL is unset on staging."},
                        ],
                    },
                },
            },
        ),
        (
            "the host replays the same turn after a crash: nothing is stored twice",
            {
                "method": "ingest",
                "params": {
                    "session": session,
                    "message": {"id": "u1", "role": "user", "content": "(replayed)"},
                },
            },
        ),
        (
            "a bad request gets a clear error naming the field",
            {"method": "ingest", "params": {"session": session, "message": {"role": "robot"}}},
        ),
        ("counts", {"method": "info"}),
        ("checkpoint the WAL", {"method": "save"}),
        ("finish in-flight work, flush, exit 0", {"method": "shutdown"}),
    ]

    with Client.spawn(db, stderr=subprocess.DEVNULL) as client:
        for label, request in turns:
            response = client.request(request["method"], request.get("params"))
            show(label, request, response)
        code = client.proc.wait(30)
    print(f"\ndaemon exited with code {code}")

    engine = Brain(db)
    try:
        restored = engine.get_message(session, "t1")
        same = restored["content"] == big_output
        print(f"restored message t1 from disk: {len(restored['content'])} chars, identical: {same}")
    finally:
        engine.close()
    print("\nthe same over a shell pipe:")
    print(f'  printf \'%s\\n\' \'{{"id":1,"method":"info"}}\' | .venv/bin/brain serve --db {db}')
    return 0 if code == 0 and same else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RPCError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
