"""A real HTTP server on loopback that speaks the OpenAI chat-completions and embeddings shapes.

Tests queue the replies it gives (status, headers, body, delay) and read back
the requests it received, headers included::

    with OpenAIServer() as server:
        server.enqueue(Reply(status=429, headers={"Retry-After": "2"}), Reply.text("ok"))
        config = LLMConfig(base_url=server.base_url, model="m")
        ...
        assert len(server.requests) == 2

Every POST (``/v1/chat/completions``, ``/v1/embeddings``) takes the next queued
reply; :meth:`Reply.embeddings` builds an embeddings answer, :meth:`Reply.tool_call`
an assistant turn calling one tool. A chat request with ``"stream": true`` gets its
completion as server-sent events (``chat.completion.chunk`` deltas, then ``[DONE]``),
as OpenAI streams it. With the queue empty a ``responder`` given to the server builds
the reply from the request (a scripted model that follows the conversation); without
one it answers 503 ``no reply queued``, so a test that makes
more calls than it planned fails loudly instead of hanging; a server made with
``OpenAIServer(embed=HashEmbedder(dim))`` instead answers every ``/v1/embeddings``
request with that embedder's vectors of the inputs (for a daemon that embeds
whenever it likes).

:meth:`OpenAIServer.hold` makes every request wait (a hung provider) until
:meth:`OpenAIServer.release`; :meth:`OpenAIServer.wait_held` waits until a
number of requests are being held, so a test knows its calls reached the
provider::

    server.hold()
    ...send 8 requests...
    server.wait_held(8)
    ...assert other work is answered meanwhile...
    server.release()
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from brain.vectors.embedders import Embedder


class Clock:
    """A monotonic clock a test moves by hand (for retry and breaker timing)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Reply:
    """One canned response; ``body`` is JSON-encoded unless it is bytes or str."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def text(cls, content: Any, *, delay: float = 0.0, **message: Any) -> Reply:
        """A 200 chat completion whose ``choices[0].message.content`` is ``content``.

        Extra keyword arguments become fields of the message (``reasoning_content``).
        """
        return cls(body=completion(content, **message), delay=delay)

    @classmethod
    def tool_call(cls, name: str, arguments: dict[str, Any], *, call_id: str = "call_1") -> Reply:
        """A 200 chat completion whose assistant message calls the tool ``name`` once."""
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        body = completion(None, tool_calls=[call])
        body["choices"][0]["finish_reason"] = "tool_calls"
        return cls(body=body)

    @classmethod
    def embeddings(
        cls, vectors: list[list[float]], *, indices: list[int] | None = None, delay: float = 0.0
    ) -> Reply:
        """A 200 ``/v1/embeddings`` answer; ``indices`` (default 0, 1, ...) label the vectors."""
        return cls(body=embedding_list(vectors, indices), delay=delay)

    @classmethod
    def error(cls, status: int, message: str = "error", **kw: Any) -> Reply:
        """A failure with an OpenAI-style ``{"error": {"message": ...}}`` body."""
        return cls(status=status, body={"error": {"message": message, "type": "test"}}, **kw)


def completion(content: Any, **message: Any) -> dict[str, Any]:
    """A chat-completions response body."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def embedding_list(vectors: list[list[float]], indices: list[int] | None = None) -> dict[str, Any]:
    """An embeddings response body, its items in the given order."""
    order = list(range(len(vectors))) if indices is None else indices
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": index, "embedding": vector}
            for index, vector in zip(order, vectors, strict=True)
        ],
        "model": "test-embedder",
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


def stream_chunks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat completion cut into the ``chat.completion.chunk`` events OpenAI streams.

    One delta with the role, the content and the tool calls (each with its
    ``index``), one with the finish reason, and a last one carrying ``usage``
    with no choices (what ``stream_options.include_usage`` asks for).
    """
    base = {"id": body.get("id", "chatcmpl-test"), "object": "chat.completion.chunk"}
    base["model"] = body.get("model", "test-model")
    choice = body["choices"][0]
    message = dict(choice["message"])
    delta: dict[str, Any] = {"role": message.pop("role", "assistant")}
    if message.get("content") is not None:
        delta["content"] = message["content"]
    calls = message.get("tool_calls") or []
    if calls:
        delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(calls)]
    for key, value in message.items():
        if key not in ("content", "tool_calls") and value is not None:
            delta[key] = value
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {**base, "choices": [], "usage": body.get("usage")},
    ]


def _wants_stream(body: bytes) -> bool:
    try:
        request = json.loads(body)
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("stream") is True


def _is_completion(body: Any) -> bool:
    return isinstance(body, dict) and bool(body.get("choices"))


@dataclass(frozen=True)
class Recorded:
    """A request as the server saw it; header names are lowercased."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)  # when it arrived (wall clock)

    def json(self) -> Any:
        return json.loads(self.body)


class OpenAIServer:
    """A ThreadingHTTPServer on 127.0.0.1, an ephemeral port, with a programmable reply queue."""

    def __init__(
        self,
        embed: Embedder | None = None,
        responder: Callable[[Recorded], Reply] | None = None,
    ) -> None:
        self.embed = embed
        self.responder = responder
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._open = threading.Event()
        self._open.set()
        self._held = 0
        self._held_changed = threading.Condition(self._lock)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True  # a delayed reply must not hold up close()
        # A short poll interval: shutdown() waits for the serving loop's next poll.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The ``base_url`` for an LLMConfig: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def enqueue(self, *replies: Reply) -> None:
        """Append replies; each request takes the next one."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Replies queued and not yet given."""
        with self._lock:
            return len(self._replies)

    def hold(self) -> None:
        """Make every request wait (without an answer) until :meth:`release`."""
        self._open.clear()

    def release(self) -> None:
        """Let held and later requests through."""
        self._open.set()

    @property
    def held(self) -> int:
        """Requests waiting for :meth:`release` now."""
        with self._lock:
            return self._held

    def wait_held(self, count: int, timeout: float = 30.0) -> None:
        """Block until at least ``count`` requests are held; AssertionError after ``timeout``."""
        with self._held_changed:
            if not self._held_changed.wait_for(lambda: self._held >= count, timeout):
                raise AssertionError(f"{self._held} requests held, expected {count}")

    def _wait_open(self) -> bool:
        """Wait while held; False if the server is closing meanwhile."""
        if self._open.is_set():
            return True
        with self._held_changed:
            self._held += 1
            self._held_changed.notify_all()
        try:
            while not self._open.wait(0.05):
                if self._closing.is_set():
                    return False
            return True
        finally:
            with self._held_changed:
                self._held -= 1
                self._held_changed.notify_all()

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # wakes handlers sleeping out a delay or held
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _take(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._replies:
                return self._replies.popleft()
        if self.embed is not None and request.path.endswith("/embeddings"):
            inputs = request.json()["input"]
            return Reply.embeddings(self.embed.embed(inputs).tolist())
        if self.responder is not None:
            return self.responder(request)
        return Reply.error(503, "no reply queued")


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if not server._wait_open():
                return
            reply = server._take(Recorded("POST", self.path, headers, body))
            if reply.delay and server._closing.wait(reply.delay):
                return
            if reply.status == 200 and _wants_stream(body) and _is_completion(reply.body):
                self._stream(reply)
                return
            if isinstance(reply.body, bytes):
                payload = reply.body
            elif isinstance(reply.body, str):
                payload = reply.body.encode()
            else:
                payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def _stream(self, reply: Reply) -> None:
            """Send a completion as OpenAI's server-sent events, closing the connection after."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for chunk in stream_chunks(reply.body):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler
