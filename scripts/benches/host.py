"""A fast host (issue 26): what the model sees when the host never pauses, after an import,
and on a real conversation once the background work has settled.

Everything goes through the daemon over pipes on its offline defaults. Five parts:

- ``loop_openai`` / ``loop_anthropic``: a tool loop of 120 turns without a pause (ingest
  the user's message, ``assemble`` at 6,000 in the matching format, ingest the assistant's
  tool call, the tool's result and the assistant's answer);
- ``coding``: a 200-turn Anthropic-shape coding session with parallel tool calls (2-3
  ``tool_use`` blocks answered by one user turn of ``tool_result`` blocks, tiny to ~30 KB),
  assembled at 8,000 with ``stubs: true`` before every model call;
- ``import_4000`` / ``import_6000``: 600 messages ingested in batches, then the first
  ``assemble`` at once (and again once the background work has settled);
- ``replay``: the longest LoCoMo conversation of ``--locomo``, 20 turns a batch with
  ``assemble(4000)`` after each, settled at the end (and, in a second replay, every 100
  turns), with how many of 30 sampled answers are still verbatim in the final context;
- ``evidence``: every conversation of the file replayed so, and for each question (not
  category 5) whether its evidence is in the final 4,000-token context.

Each assemble series reports the same figures (see ``_series``), and every numeric member
of the assemble result, whatever it is called, under ``fields.`` (a new field such as a
count of gap stand-ins shows up without a change here).
"""

from __future__ import annotations

import collections
import math
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from benches.core import CALL_TIMEOUT_S, SEED, Message, Metrics, Settings, Shared
from benches.corpus import make_content
from benches.procs import client_daemon
from benches.stats import percentile
from benches.summaries import eval_locomo_module
from brain import estimate_tokens
from protocol.client import Client

LOOP_TURNS: Final = 120
LOOP_BUDGET: Final = 6_000
CODING_TURNS: Final = 200
CODING_BUDGET: Final = 8_000
IMPORT_MESSAGES: Final = 600
IMPORT_BATCH: Final = 100
IMPORT_BUDGETS: Final = (4_000, 6_000)
REPLAY_BUDGET: Final = 4_000
REPLAY_BATCH: Final = 20
REPLAY_CHECKPOINT: Final = 100  # the second replay settles and assembles every this many turns
ANSWER_SAMPLE: Final = 30
EVIDENCE_PRESENT: Final = 0.9  # share of an evidence's content words that counts as present
SETTLE_POLL_S: Final = 0.01
SETTLE_LIMIT_S: Final = 300.0
_SKIP_FIELDS: Final = frozenset({"messages", "system", "budget"})

# -- a coding session, deterministic --------------------------------------------------------

_MODULES: Final = (
    "src/api/routes.py",
    "src/api/auth.py",
    "src/core/cache.py",
    "src/core/scheduler.py",
    "src/db/models.py",
    "src/db/migrations/0042_add_index.py",
    "src/workers/queue.py",
    "src/utils/retry.py",
    "tests/test_cache.py",
    "tests/test_scheduler.py",
    "tests/api/test_routes.py",
    "pyproject.toml",
)
_NOUNS: Final = (
    "session",
    "token",
    "request",
    "payload",
    "record",
    "batch",
    "worker",
    "entry",
    "config",
    "user",
    "job",
    "lock",
)
_VERBS: Final = ("load", "parse", "flush", "resolve", "build", "fetch", "update", "retry", "emit")
_TYPES: Final = ("str", "int", "dict[str, Any]", "list[Entry]", "bytes", "float | None", "bool")
_ERRORS: Final = (
    "KeyError: 'user_id'",
    "AssertionError: assert 3 == 4",
    "TimeoutError: the lock was not released within 5.0 s",
    "sqlite3.OperationalError: database is locked",
    "TypeError: 'NoneType' object is not subscriptable",
    "ValueError: invalid literal for int() with base 10: ''",
)
_ASKS: Final = (
    "The test {test} fails with {error} since the last merge. Can you find out why and fix it?",
    "Please add a {noun} cache to {path}; it should expire entries after {n} seconds.",
    "Why does {path} call {verb}_{noun} twice per request? Look into it and simplify it.",
    "Rename {verb}_{noun} to {verb2}_{noun} everywhere and update the tests.",
    "CI is red on {test}: {error}. The change before it touched {path}.",
    "Can you check whether {path} still handles an empty {noun} list? A user saw {error}.",
    "Write a migration that adds an index on {noun}_id, then run the test suite.",
    "Profile {verb}_{noun} in {path}: p95 went from {n} ms to {m} ms after the upgrade.",
)
_TOOLS: Final = ("read_file", "grep", "run_tests", "shell", "list_dir", "edit_file")


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _ask(rng: random.Random) -> str:
    """A user's request in a coding session, with a sentence or two of context."""
    template = rng.choice(_ASKS)
    text = template.format(
        test=f"tests/test_{rng.choice(_NOUNS)}.py::test_{_ident(rng)}",
        error=rng.choice(_ERRORS),
        path=rng.choice(_MODULES),
        noun=rng.choice(_NOUNS),
        verb=rng.choice(_VERBS),
        verb2=rng.choice(_VERBS),
        n=rng.randint(2, 900),
        m=rng.randint(900, 9_000),
    )
    if rng.random() < 0.5:
        text += " " + make_content(rng, 80, 400)
    return text


def _code(rng: random.Random, target: int) -> str:
    """Python source of about ``target`` characters."""
    lines: list[str] = []
    length = 0
    while length < target:
        name, noun = _ident(rng), rng.choice(_NOUNS)
        block = [
            f"def {name}(self, {noun}: {rng.choice(_TYPES)}, *, timeout: float = "
            f"{rng.randint(1, 30)}.0) -> {rng.choice(_TYPES)}:",
            f'    """{make_content(rng, 30, 90)}"""',
            f"    if {noun} is None:",
            f'        raise ValueError("{noun} is required")',
            f"    found = self._{rng.choice(_NOUNS)}s.get({noun}.id, {rng.randint(0, 99)})",
            f"    for item in found.{rng.choice(_NOUNS)}s:",
            f"        item.{_ident(rng)}(timeout=timeout)",
            f"    return {rng.choice(_VERBS)}_{noun}(found)",
            "",
        ]
        lines += [*block[: rng.randint(4, len(block))], ""]
        length += sum(len(line) + 1 for line in block)
    return "\n".join(lines)


def _tool_result(rng: random.Random, tool: str, target: int) -> str:
    """What ``tool`` returns, about ``target`` characters (at least one line)."""
    if tool == "read_file":
        return _code(rng, target)[: max(target, 1)]
    if tool == "edit_file":
        path = rng.choice(_MODULES)
        return f"Applied 1 edit to {path}: {rng.randint(1, 12)} lines changed."[: max(target, 20)]
    lines: list[str] = []
    length = 0
    while length < target or not lines:
        if tool == "grep":
            line = f"{rng.choice(_MODULES)}:{rng.randint(1, 900)}:    {_ident(rng)}(" + (
                f"{rng.choice(_NOUNS)}, timeout={rng.randint(1, 30)})"
            )
        elif tool == "run_tests":
            outcome = rng.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
            line = f"tests/test_{rng.choice(_NOUNS)}.py::test_{_ident(rng)} {outcome}"
            if outcome == "FAILED":
                line += f"\nE       {rng.choice(_ERRORS)}"
        elif tool == "list_dir":
            line = f"{rng.randint(100, 99_999):>8}  {rng.choice(_MODULES)}"
        else:  # shell: git log / diff
            if rng.random() < 0.3:
                line = f"commit {rng.getrandbits(160):040x}\n    {make_content(rng, 30, 80)}"
            else:
                sign = rng.choice("+- ")
                line = f"{sign}    {_ident(rng)}({rng.choice(_NOUNS)}, {rng.randint(0, 9)})"
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)


def _tool_input(rng: random.Random, tool: str) -> dict[str, Any]:
    if tool == "run_tests":
        return {"args": f"tests/test_{rng.choice(_NOUNS)}.py -x -q"}
    if tool == "shell":
        return {"command": rng.choice(("git log -5 --stat", "git diff HEAD~1", "git status"))}
    if tool == "grep":
        return {"pattern": _ident(rng), "path": "src/"}
    if tool == "edit_file":
        return {"path": rng.choice(_MODULES), "old": _ident(rng), "new": _ident(rng)}
    return {"path": rng.choice(_MODULES)}


def _answer(rng: random.Random) -> str:
    ident, path = _ident(rng), rng.choice(_MODULES)
    return (
        f"I changed {ident} in {path} so that it no longer holds the {rng.choice(_NOUNS)} lock "
        f"while it waits; {rng.choice(('the tests pass now', 'the failing test passes'))}. "
        + make_content(rng, 100, 600)
    )


def loop_turns(shape: str, seed: int) -> Iterator[tuple[Message, list[Message]]]:
    """Endless turns of a tool loop in ``shape`` (``openai`` or ``anthropic``): the user's
    message, then the assistant's tool call, the tool's result (~300-3,000 tokens) and the
    assistant's answer. The same seed gives the same words in either shape."""
    rng = random.Random(seed)
    n = 0
    while True:
        ask = _ask(rng)
        tool = rng.choice(_TOOLS)
        args = _tool_input(rng, tool)
        output = _tool_result(rng, tool, rng.randint(1_200, 12_000))
        said = f"Let me look at {args.get('path', 'the code')} first."
        answer = _answer(rng)
        call_id = f"call_{n:06d}"
        if shape == "openai":
            user: Message = {"id": f"t{n}-u", "role": "user", "content": ask}
            call = {"name": tool, "arguments": orjson.dumps(args).decode()}
            rest: list[Message] = [
                {
                    "id": f"t{n}-c",
                    "role": "assistant",
                    "content": said,
                    "tool_calls": [{"id": call_id, "type": "function", "function": call}],
                },
                {"id": f"t{n}-r", "role": "tool", "tool_call_id": call_id, "content": output},
                {"id": f"t{n}-a", "role": "assistant", "content": answer},
            ]
        else:
            user = {"id": f"t{n}-u", "role": "user", "content": [{"type": "text", "text": ask}]}
            rest = [
                {
                    "id": f"t{n}-c",
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": said},
                        {"type": "tool_use", "id": call_id, "name": tool, "input": args},
                    ],
                },
                {
                    "id": f"t{n}-r",
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}],
                },
                {
                    "id": f"t{n}-a",
                    "role": "assistant",
                    "content": [{"type": "text", "text": answer}],
                },
            ]
        yield user, rest
        n += 1


def _result_size(rng: random.Random) -> int:
    """A tool result's characters in the coding session: tiny, medium, or up to ~30 KB."""
    roll = rng.random()
    if roll < 0.4:
        return rng.randint(20, 300)
    if roll < 0.85:
        return rng.randint(1_000, 6_000)
    return rng.randint(10_000, 30_000)


def coding_turns(seed: int) -> Iterator[tuple[Message, list[list[Message]], Message]]:
    """Endless turns of an Anthropic-shape coding session: the user's message, one or two
    rounds of (an assistant message with 2-3 parallel ``tool_use`` blocks, one user message
    with all their ``tool_result`` blocks), and the assistant's answer."""
    rng = random.Random(seed)
    n = 0
    calls = 0
    while True:
        user: Message = {
            "id": f"c{n}-u",
            "role": "user",
            "content": [{"type": "text", "text": _ask(rng)}],
        }
        rounds: list[list[Message]] = []
        for r in range(rng.randint(1, 2)):
            uses: list[dict[str, Any]] = []
            results: list[dict[str, Any]] = []
            for _ in range(rng.randint(2, 3)):
                calls += 1
                tool = rng.choice(_TOOLS)
                use_id = f"toolu_{calls:08d}"
                uses.append(
                    {
                        "type": "tool_use",
                        "id": use_id,
                        "name": tool,
                        "input": _tool_input(rng, tool),
                    }
                )
                output = _tool_result(rng, tool, _result_size(rng))
                results.append({"type": "tool_result", "tool_use_id": use_id, "content": output})
            text = {"type": "text", "text": make_content(rng, 40, 200)}
            rounds.append(
                [
                    {"id": f"c{n}-{r}-c", "role": "assistant", "content": [text, *uses]},
                    {"id": f"c{n}-{r}-r", "role": "user", "content": results},
                ]
            )
        answer: Message = {
            "id": f"c{n}-a",
            "role": "assistant",
            "content": [{"type": "text", "text": _answer(rng)}],
        }
        yield user, rounds, answer
        n += 1


def as_openai(message: Message) -> list[Message]:
    """An Anthropic-shape message of ``coding_turns`` in OpenAI shape: text blocks joined,
    ``tool_use`` blocks as ``tool_calls``, a user turn of ``tool_result`` blocks as one
    ``tool`` message each (the same words, ids and order)."""
    blocks = message["content"]
    text = "\n".join(b["text"] for b in blocks if b["type"] == "text")
    results = [b for b in blocks if b["type"] == "tool_result"]
    if results:
        return [
            {
                "id": f"{message['id']}-{i}",
                "role": "tool",
                "tool_call_id": b["tool_use_id"],
                "content": b["content"],
            }
            for i, b in enumerate(results)
        ]
    out: Message = {"id": message["id"], "role": message["role"], "content": text}
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": orjson.dumps(b["input"]).decode()},
        }
        for b in blocks
        if b["type"] == "tool_use"
    ]
    if calls:
        out["tool_calls"] = calls
    return [out]


# -- measuring a series of assembles ---------------------------------------------------------


def message_text(message: Message) -> str:
    """The words of a message (strings, text blocks, tool inputs and results), for token
    estimates and for looking things up in a context."""
    parts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for key in ("text", "content", "input", "arguments", "function", "refusal"):
                if key in value:
                    walk(value[key] if key != "input" else orjson.dumps(value[key]).decode())

    walk(message.get("content"))
    for call in message.get("tool_calls") or ():
        walk(call.get("function"))
    return "\n".join(parts)


def context_text(result: dict[str, Any]) -> str:
    """Everything an assemble result shows the model, as one string."""
    texts = [message_text(m) for m in result.get("messages") or ()]
    system = result.get("system")
    if isinstance(system, str):
        texts.insert(0, system)
    elif isinstance(system, list):
        texts.insert(0, message_text({"content": system}))
    return "\n".join(texts)


def numeric_fields(result: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every numeric (or boolean) member of an assemble result, nested ones dotted, but
    ``messages``, ``system`` and ``budget``."""
    out: dict[str, float] = {}
    for key, value in result.items():
        if not prefix and key in _SKIP_FIELDS:
            continue
        if isinstance(value, bool | int | float):
            out[f"{prefix}{key}"] = float(value)
        elif isinstance(value, dict):
            out.update(numeric_fields(value, f"{prefix}{key}."))
    return out


class Series:
    """The assembles of one scenario: each answer's numeric fields, round-trip time, and
    whether the history ingested so far (estimated tokens) exceeded the budget."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.rows: list[dict[str, float]] = []
        self.ms: list[float] = []
        self.full: list[bool] = []

    def assemble(
        self, client: Client, params: dict[str, Any], history_tokens: int
    ) -> dict[str, Any]:
        started = time.perf_counter_ns()
        result: dict[str, Any] = client.call(
            "assemble", {**params, "budget": self.budget}, timeout=CALL_TIMEOUT_S
        )
        self.ms.append((time.perf_counter_ns() - started) / 1e6)
        self.rows.append(numeric_fields(result))
        self.full.append(history_tokens > self.budget)
        return result

    def metrics(self, prefix: str) -> Metrics:
        """The figures of the series (see ``host_params``)."""
        rows = self.rows
        dropped_m = [r.get("dropped.messages", 0.0) for r in rows]
        dropped_s = [r.get("dropped.summaries", 0.0) for r in rows]
        shares = [r.get("tokens", 0.0) / self.budget for r in rows]
        full = [s for s, f in zip(shares, self.full, strict=True) if f]
        ms = sorted(self.ms)
        out: Metrics = {
            "assembles": float(len(rows)),
            "assembles_over_budget_history": float(len(full)),
            "dropped_messages_assembles": float(sum(d > 0 for d in dropped_m)),
            "dropped_summaries_assembles": float(sum(d > 0 for d in dropped_s)),
            "dropped_messages_max": max(dropped_m, default=0.0),
            "dropped_summaries_max": max(dropped_s, default=0.0),
            "over_budget_tokens_assembles": float(sum(s > 1 for s in shares)),
            "tokens_max": max((r.get("tokens", 0.0) for r in rows), default=0.0),
            "assemble_p50_ms": percentile(ms, 50),
            "assemble_p95_ms": percentile(ms, 95),
            "assemble_max_ms": max(ms, default=math.nan),
            "used_share_median": statistics.median(shares) if shares else math.nan,
            "used_share_min": min(shares, default=math.nan),
            "used_share_full_median": statistics.median(full) if full else math.nan,
            "used_share_full_min": min(full, default=math.nan),
        }
        names = sorted({k for r in rows for k in r})
        for name in names:
            values = [r.get(name, 0.0) for r in rows]
            out[f"fields.{name}.nonzero"] = float(sum(v != 0 for v in values))
            out[f"fields.{name}.max"] = max(values)
        return {f"{prefix}{k}": v for k, v in out.items()}


def settle(client: Client) -> float:
    """Poll ``info`` until no background compaction is running or waiting; the seconds."""
    started = time.perf_counter()
    while time.perf_counter() - started < SETTLE_LIMIT_S:
        if not client.call("info", timeout=CALL_TIMEOUT_S)["compaction"]["active"]:
            break
        time.sleep(SETTLE_POLL_S)
    return time.perf_counter() - started


def settled_assemble(client: Client, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Settle, assemble, and again while the assemble started work that folded something
    (a new budget): the settled context and the seconds spent settling."""
    waited = settle(client)
    result: dict[str, Any] = {}
    for _ in range(3):
        before = client.call("info", timeout=CALL_TIMEOUT_S)["compaction"]["completed"]
        result = client.call("assemble", params, timeout=CALL_TIMEOUT_S)
        waited += settle(client)
        if client.call("info", timeout=CALL_TIMEOUT_S)["compaction"]["completed"] == before:
            break
    return result, waited


def _settled_metrics(result: dict[str, Any], budget: int, waited: float, prefix: str) -> Metrics:
    fields = numeric_fields(result)
    return {
        f"{prefix}settle_s": waited,
        f"{prefix}used_share": fields.get("tokens", 0.0) / budget,
        **{f"{prefix}fields.{k}": v for k, v in fields.items()},
    }


# -- the scenarios ----------------------------------------------------------------------------


def _tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(message_text(m)) + 4 for m in messages)


def run_loop(client: Client, shape: str, turns: int, prefix: str) -> Metrics:
    """The unpaused tool loop in ``shape``, assembled in the matching format."""
    session = f"loop-{shape}"
    series = Series(LOOP_BUDGET)
    params = {"session": session, "format": shape}
    history = 0
    started = time.perf_counter()
    stream = loop_turns(shape, SEED + 260)
    for _ in range(turns):
        user, rest = next(stream)
        client.call("ingest", {"session": session, "messages": [user]}, timeout=CALL_TIMEOUT_S)
        history += _tokens([user])
        series.assemble(client, params, history)
        client.call("ingest", {"session": session, "messages": rest}, timeout=CALL_TIMEOUT_S)
        history += _tokens(rest)
    out = series.metrics(prefix)
    out[f"{prefix}turns"] = float(turns)
    out[f"{prefix}history_tokens"] = float(history)
    out[f"{prefix}run_s"] = time.perf_counter() - started
    return out


def run_coding(client: Client, turns: int, prefix: str, shape: str = "anthropic") -> Metrics:
    """The unpaused coding session with parallel tool calls, assembled before every model
    call (after the user's message and after each round of tool results) in ``shape``'s
    format; ``openai``: the same messages in OpenAI shape (``as_openai``)."""
    session = "coding"
    series = Series(CODING_BUDGET)
    params = {"session": session, "format": shape, "stubs": True}

    def shaped(messages: Sequence[Message]) -> list[Message]:
        if shape == "anthropic":
            return list(messages)
        return [o for m in messages for o in as_openai(m)]

    history = 0
    dropped_turns = 0
    started = time.perf_counter()
    stream = coding_turns(SEED + 261)
    for _ in range(turns):
        user, rounds, answer = next(stream)
        user, answer = shaped([user])[0], shaped([answer])[0]
        rounds = [shaped(pair) for pair in rounds]
        before = len(series.rows)
        client.call("ingest", {"session": session, "messages": [user]}, timeout=CALL_TIMEOUT_S)
        history += _tokens([user])
        series.assemble(client, params, history)
        for pair in rounds:
            client.call("ingest", {"session": session, "messages": pair}, timeout=CALL_TIMEOUT_S)
            history += _tokens(pair)
            series.assemble(client, params, history)
        client.call("ingest", {"session": session, "messages": [answer]}, timeout=CALL_TIMEOUT_S)
        history += _tokens([answer])
        dropped_turns += any(r.get("dropped.messages", 0) > 0 for r in series.rows[before:])
    out = series.metrics(prefix)
    out[f"{prefix}turns"] = float(turns)
    out[f"{prefix}dropped_messages_turns"] = float(dropped_turns)
    out[f"{prefix}history_tokens"] = float(history)
    out[f"{prefix}run_s"] = time.perf_counter() - started
    return out


def run_import(client: Client, count: int, budget: int, prefix: str) -> Metrics:
    """``count`` messages of the OpenAI-shape tool loop ingested in batches, then the first
    ``assemble`` at once, and a settled one."""
    session = f"import-{budget}"
    messages: list[Message] = []
    stream = loop_turns("openai", SEED + 262)
    while len(messages) < count:
        user, rest = next(stream)
        messages += [user, *rest]
    messages = messages[:count]
    started = time.perf_counter()
    for at in range(0, count, IMPORT_BATCH):
        batch = messages[at : at + IMPORT_BATCH]
        client.call("ingest", {"session": session, "messages": batch}, timeout=CALL_TIMEOUT_S)
    ingest_s = time.perf_counter() - started
    series = Series(budget)
    series.assemble(client, {"session": session}, _tokens(messages))
    first = series.rows[0]
    result, waited = settled_assemble(client, {"session": session, "budget": budget})
    out: Metrics = {
        "messages": float(count),
        "history_tokens": float(_tokens(messages)),
        "ingest_s": ingest_s,
        "first_ms": series.ms[0],
        "first_used_share": first.get("tokens", 0.0) / budget,
        **{f"first.{k}": v for k, v in first.items()},
        **_settled_metrics(result, budget, waited, "settled."),
    }
    return {f"{prefix}{k}": v for k, v in out.items()}


# -- LoCoMo: replay, settle, look for the answers and the evidence ------------------------------

_WORD: Final = re.compile(r"[a-z0-9]+")
_TAG: Final = re.compile(r"\s*<([A-Za-z_][\w-]*)[\s>/]")
_STOP_TEXT: Final = (
    "the a an and or but if of to in on at for with from by as is are was were be been being "
    "it its this that these those i you he she we they me him her us them my your his our "
    "their what which who whom when where why how not no so do does did have has had will "
    "would can could should just really too very also there here then than about into out "
    "up down over all any some more most such only own same other been am im ive dont its "
    "thats yeah oh wow hey hi thanks thank"
)
_STOP: Final = frozenset(_STOP_TEXT.split())


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry content: lower-cased runs of letters and digits, at
    least three long, minus common function words."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def normalised(text: str) -> str:
    """Lower-cased, whitespace collapsed: how answers are looked for verbatim."""
    return " ".join(text.lower().split())


def longest_conversation(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    module = eval_locomo_module()
    return max(samples, key=lambda s: len(module.messages_of(s)[0]))


def replay(
    client: Client,
    session: str,
    messages: Sequence[Message],
    checkpoints: bool = False,
    prefix: str = "",
) -> tuple[Metrics, dict[str, Any]]:
    """Replay ``messages`` 20 a batch with ``assemble(4000)`` after each batch, no pause; with
    ``checkpoints`` also settle and assemble every 100 turns. Then settle and assemble: the
    figures and the final (settled) result."""
    series = Series(REPLAY_BUDGET)
    params = {"session": session, "budget": REPLAY_BUDGET}
    out: Metrics = {}
    history = 0
    started = time.perf_counter()
    for at in range(0, len(messages), REPLAY_BATCH):
        batch = list(messages[at : at + REPLAY_BATCH])
        client.call("ingest", {"session": session, "messages": batch}, timeout=CALL_TIMEOUT_S)
        history += _tokens(batch)
        series.assemble(client, {"session": session}, history)
        done = at + len(batch)
        if checkpoints and done % REPLAY_CHECKPOINT == 0 and done < len(messages):
            result, waited = settled_assemble(client, params)
            key = f"{prefix}settled_turn_{done}."
            out[f"{key}used_share"] = float(result["tokens"]) / REPLAY_BUDGET
            out[f"{key}settle_s"] = waited
            out[f"{key}history_over_budget"] = float(history > REPLAY_BUDGET)
    replay_s = time.perf_counter() - started
    final, waited = settled_assemble(client, params)
    shown = collections.Counter(shown_as(m) for m in final["messages"])
    out.update(series.metrics(f"{prefix}unpaused."))
    out.update(_settled_metrics(final, REPLAY_BUDGET, waited, f"{prefix}final."))
    out[f"{prefix}turns"] = float(len(messages))
    out[f"{prefix}history_tokens"] = float(history)
    out[f"{prefix}replay_s"] = replay_s
    for kind, count in shown.items():
        out[f"{prefix}final.shown.{kind}"] = float(count)
    out.setdefault(f"{prefix}final.shown.summary", 0.0)
    out.setdefault(f"{prefix}final.shown.raw", 0.0)
    return out, final


def shown_as(message: Message) -> str:
    """What a context message is: the tag it opens with (``summary``, or whatever else the
    daemon shows in place of history), else ``raw``."""
    found = _TAG.match(message_text(message))
    return found.group(1) if found else "raw"


def qa_items(sample: dict[str, Any], turns: dict[str, str]) -> list[dict[str, Any]]:
    """The sample's questions but category 5, with their evidence turns among ``turns``
    (dia id -> text; ids extracted as ``D\\d+:\\d+``), those left with none skipped."""
    out = []
    for qa in sample.get("qa", []):
        category = str(qa.get("category", "?"))
        if category == "5" or "answer" not in qa:
            continue
        ids = [
            f"D{int(a)}:{int(b)}" for a, b in re.findall(r"D(\d+):(\d+)", str(qa.get("evidence")))
        ]
        evidence = [turns[i] for i in dict.fromkeys(ids) if i in turns]
        if evidence:
            out.append({"category": category, "answer": str(qa["answer"]), "evidence": evidence})
    return out


def score_question(qa: dict[str, Any], context: str, words: set[str]) -> dict[str, float]:
    """Whether a question's evidence is in a context (its text normalised, and its content
    words): the answer verbatim, every evidence turn verbatim, and the share of the evidence
    turns' content words present (``present`` when at least ``EVIDENCE_PRESENT``)."""
    needed: set[str] = set()
    for text in qa["evidence"]:
        needed |= content_words(text)
    share = len(needed & words) / len(needed) if needed else 1.0
    return {
        "answer_verbatim": float(normalised(qa["answer"]) in context),
        "evidence_raw": float(all(normalised(t) in context for t in qa["evidence"])),
        "evidence_word_share": share,
        "evidence_words_present": float(share >= EVIDENCE_PRESENT),
    }


def _conversation(sample: dict[str, Any], size: float) -> list[Message]:
    messages: list[Message] = eval_locomo_module().messages_of(sample)[0]
    if size < 1:
        messages = messages[: max(2 * REPLAY_BATCH, round(len(messages) * size))]
    return messages


def run_replay(work: Path, sample: dict[str, Any], size: float) -> Metrics:
    """The longest conversation: replayed unpaused, then settled; replayed again with a settle
    every 100 turns; 30 sampled answers looked for in the final context."""
    messages = _conversation(sample, size)
    turns = {str(m["id"]): str(m["content"]) for m in messages}
    with client_daemon(work / "replay.db", work / "replay.log") as client:
        out, final = replay(client, "replay", messages, prefix="replay.")
    with client_daemon(work / "replay-cp.db", work / "replay-cp.log") as client:
        cp, _ = replay(client, "replay", messages, checkpoints=True, prefix="replay_checkpoints.")
    out.update(cp)
    full = normalised("\n".join(turns.values()))
    pool = [q for q in qa_items(sample, turns) if normalised(q["answer"]) in full]
    sample_qs = random.Random(SEED).sample(pool, min(ANSWER_SAMPLE, len(pool)))
    context = normalised(context_text(final))
    out["replay.answers.pool"] = float(len(pool))
    out["replay.answers.sampled"] = float(len(sample_qs))
    out["replay.answers.verbatim_in_final"] = float(
        sum(normalised(q["answer"]) in context for q in sample_qs)
    )
    return out


def run_evidence(work: Path, samples: Sequence[dict[str, Any]], size: float) -> Metrics:
    """Every conversation replayed and settled; each question's evidence against the final
    4,000-token context, overall and per category."""
    rows: list[tuple[str, dict[str, float]]] = []
    control: list[float] = []
    out: Metrics = {}
    started = time.perf_counter()
    for i, sample in enumerate(samples):
        messages = _conversation(sample, size)
        turns = {str(m["id"]): str(m["content"]) for m in messages}
        with client_daemon(work / f"evidence-{i}.db", work / f"evidence-{i}.log") as client:
            _, final = replay(client, "s", messages)
        context = normalised(context_text(final))
        words = content_words(context)
        full = normalised("\n".join(turns.values()))
        for text in turns.values():  # the control: any turn's content words in the context
            needed = content_words(text)
            if needed:
                control.append(len(needed & words) / len(needed))
        for qa in qa_items(sample, turns):
            row = score_question(qa, context, words)
            # the answer can be looked for only where the conversation has it verbatim
            row["answer_in_conversation"] = float(normalised(qa["answer"]) in full)
            rows.append((qa["category"], row))
        out[f"evidence.conversations.{sample['sample_id']}.used_share"] = (
            float(final["tokens"]) / REPLAY_BUDGET
        )
    groups: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    for category, row in rows:
        groups["all"].append(row)
        groups[f"category_{category}"].append(row)
    for name, group in groups.items():
        key = f"evidence.{name}."
        out[f"{key}questions"] = float(len(group))
        for figure in ("evidence_words_present", "evidence_raw", "evidence_word_share"):
            out[f"{key}{figure}"] = statistics.fmean(r[figure] for r in group)
        answerable = [r for r in group if r["answer_in_conversation"]]
        out[f"{key}answer_in_conversation"] = float(len(answerable))
        out[f"{key}answer_verbatim"] = (
            statistics.fmean(r["answer_verbatim"] for r in answerable) if answerable else math.nan
        )
    out["evidence.control_turn_word_share"] = statistics.fmean(control) if control else math.nan
    out["evidence.conversations_replayed"] = float(len(samples))
    out["evidence.run_s"] = time.perf_counter() - started
    return out


# -- the bench --------------------------------------------------------------------------------


def host_params(s: Settings) -> dict[str, Any]:
    return {
        "loop": {
            "turns": s.n(LOOP_TURNS, 3),
            "budget": LOOP_BUDGET,
            "shapes": ["openai", "anthropic"],
            "turn": "ingest the user's message; assemble (format = shape); ingest the "
            "assistant's tool call, the tool result (~300-3,000 tokens) and the answer; no pause",
        },
        "coding": {
            "turns": s.n(CODING_TURNS, 3),
            "budget": CODING_BUDGET,
            "assemble": "format anthropic, stubs true, before every model call: after the user's "
            "message and after each of 1-2 rounds of 2-3 parallel tool_use blocks answered by one "
            "user turn of tool_result blocks (20 B to 30 KB)",
            "coding_openai": "the same messages in OpenAI shape (tool_calls, one tool message "
            "a result), assembled in format openai: the same conversation in the other shape",
        },
        "import": {
            "messages": s.n(IMPORT_MESSAGES, 20),
            "batch": IMPORT_BATCH,
            "budgets": list(IMPORT_BUDGETS),
            "content": "the OpenAI-shape tool loop's messages",
        },
        "replay": {
            "locomo": str(s.locomo) if s.locomo else None,
            "conversation": "the one with the most turns",
            "batch": REPLAY_BATCH,
            "budget": REPLAY_BUDGET,
            "checkpoints_every": REPLAY_CHECKPOINT,
            "answers_sampled": ANSWER_SAMPLE,
            "turns_kept": "all" if s.size >= 1 else f"the first {s.size:g} of each conversation",
        },
        "evidence": {
            "conversations": "every conversation of the file",
            "skipped": "category 5 (adversarial: the answer is not in the text)",
            "evidence_words_present": f">= {EVIDENCE_PRESENT:g} of the distinct content words "
            "(lower-cased [a-z0-9]+ runs of 3+ characters, common function words removed) of "
            "all the question's evidence turns appear among the final context's words",
            "evidence_raw": "every evidence turn's text appears verbatim (case and whitespace "
            "normalised) in the final context",
            "answer_verbatim": "the answer string appears verbatim (normalised) in the final "
            "context, over the questions whose answer appears verbatim in the conversation",
        },
        "settled": "poll info until compaction.active is 0, assemble; again while that "
        "assemble started a compaction that folded something",
        "history_over_budget": "the ingested messages' estimated tokens (text, tool inputs "
        "and results, +4 a message) exceed the budget; used_share_full_* count only those",
        "fields": "every numeric member of the assemble result: nonzero = assembles where "
        "it is not 0, max",
        "daemon": "python -m daemon, offline defaults (no LLM)",
    }


def bench_host(shared: Shared, work: Path) -> Metrics:
    """Issue 26's fast-host, import and budget-use figures (each part on its own daemon)."""
    settings = shared.settings
    out: Metrics = {}

    def timed(name: str, part: Callable[[], Metrics]) -> None:
        started = time.perf_counter()
        out.update(part())
        took = time.perf_counter() - started
        out[f"part_s.{name}"] = took
        print(f"  host: {name} {took:.1f} s", file=sys.stderr)

    def daemon(name: str) -> Any:
        return client_daemon(work / f"{name}.db", work / f"{name}.log")

    def loop(shape: str) -> Metrics:
        with daemon(f"loop-{shape}") as client:
            return run_loop(client, shape, settings.n(LOOP_TURNS, 3), f"loop_{shape}.")

    def coding(shape: str) -> Metrics:
        name = "coding" if shape == "anthropic" else f"coding_{shape}"
        with daemon(name) as client:
            return run_coding(client, settings.n(CODING_TURNS, 3), f"{name}.", shape)

    def imports() -> Metrics:
        got: Metrics = {}
        for budget in IMPORT_BUDGETS:
            with daemon(f"import-{budget}") as client:
                count = settings.n(IMPORT_MESSAGES, 20)
                got.update(run_import(client, count, budget, f"import_{budget}."))
        return got

    timed("loop_openai", lambda: loop("openai"))
    timed("loop_anthropic", lambda: loop("anthropic"))
    timed("coding", lambda: coding("anthropic"))
    timed("coding_openai", lambda: coding("openai"))
    timed("import", imports)
    if settings.locomo is not None:
        samples = orjson.loads(settings.locomo.read_bytes())
        timed("replay", lambda: run_replay(work, longest_conversation(samples), settings.size))
        count = len(samples) if settings.size >= 1 else max(1, round(len(samples) * settings.size))
        timed("evidence", lambda: run_evidence(work, samples[:count], settings.size))
    else:
        print("  host: no LoCoMo file (--locomo): replay and evidence not run", file=sys.stderr)
    return out
