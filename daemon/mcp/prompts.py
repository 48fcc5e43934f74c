"""The prompts: ``recall`` (a session's context under a budget) and ``escalate``
(how to dig an answer out of memory: grep, then describe, then expand_query).
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server.mcpserver import AssistantMessage, MCPServer, Message, UserMessage
from mcp.shared.exceptions import MCPError

from daemon.mcp.calls import Calls
from daemon.mcp.tools import Pin
from protocol import errors as wire

RECALL_BUDGET: Final = 4_000
"""Tokens of the ``recall`` prompt when it is given no ``budget``."""

ESCALATION: Final = (
    "Answer from memory, not from guesses. Memory holds every message of past "
    "conversations, also those folded into summaries or left out of your context.\n"
    "1. memory_grep: find where it was discussed (words; mode regex for exact "
    "patterns, semantic for meaning). Hits carry ids.\n"
    "2. memory_describe: read one hit whole by its id (a message, a sum_ summary, "
    "or a file_ with lines for a range).\n"
    "3. memory_expand_query: when the answer is spread over many messages or hidden "
    "under summaries, ask it with the summary ids (or a query) for a cited answer; "
    "memory_expand walks one summary down to its messages.\n"
    "Cite the ids you used. If memory has nothing, say so."
)


def register(server: MCPServer, calls: Calls, pin: Pin) -> None:
    """Add the prompts to ``server``."""

    @server.prompt(
        "recall",
        title="Recall a conversation",
        description="A session's remembered context (summaries of what was folded, then "
        f"the recent messages) within budget tokens (default {RECALL_BUDGET}).",
    )
    async def recall(session: str | None = None, budget: str | None = None) -> list[Message]:
        target = session or pin.session
        if target is None:
            raise MCPError(wire.InvalidParams.CODE, "session: required (no session is pinned)")
        if pin.session is not None and target != pin.session:
            raise MCPError(
                wire.ScopeDenied.CODE,
                "session: this server is pinned to another session",
                {"reason": "scope"},
            )
        tokens = RECALL_BUDGET
        if budget:
            try:
                tokens = int(budget)
            except ValueError:
                raise MCPError(wire.InvalidParams.CODE, "budget: must be an integer") from None
        try:
            result = await calls.call("assemble", {"session": target, "budget": tokens})
        except wire.RPCError as exc:
            raise MCPError(exc.code, exc.message, exc.data) from None
        messages: list[Message] = [_message(m) for m in result["messages"]]
        if not messages:
            messages = [UserMessage(f"Nothing is remembered of session {target!r} yet.")]
        return messages

    @server.prompt(
        "escalate",
        title="Search memory step by step",
        description="How to dig an answer out of memory: memory_grep, then memory_describe, "
        "then memory_expand_query.",
    )
    async def escalate(question: str | None = None) -> list[Message]:
        text = ESCALATION if not question else f"{ESCALATION}\n\nQuestion: {question}"
        return [UserMessage(text)]


def _message(message: dict[str, Any]) -> Message:
    """An assembled (OpenAI-shape) message as a prompt message: user or assistant text
    (a system or developer message's text says its role)."""
    role = message.get("role")
    text = _text(message.get("content"))
    for call in message.get("tool_calls") or ():
        # A function's call, a custom tool's ({"custom": {"name", "input"}}) or a
        # newer type's: its object is under its type's name.
        kind = call.get("type")
        kind = kind if isinstance(kind, str) and kind else "function"
        inner = call.get(kind) if isinstance(call.get(kind), dict) else {}
        args = inner.get("arguments", inner.get("input", ""))
        text += f"\n[called {inner.get('name', kind)}({args})]"
    if role == "assistant":
        return AssistantMessage(text.strip())
    if role in ("system", "developer"):  # MCP prompts have no such role: said in the text
        text = f"[{role}] {text}"
    elif role == "tool":
        text = f"[tool result {message.get('tool_call_id', '')}] {text}"
    return UserMessage(text.strip())


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'block')}]")
    return "\n".join(parts)
