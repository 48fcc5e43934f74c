"""brain's main job, shown through a real ``brain serve`` child over its stdio pipes.

A host agent replays four working days of a conversation between Maya (the
user) and Atlas (her assistant), a few hundred turns with tool calls and
results, the way a host does it: ingest each turn, assemble the context under
a small budget before each model call. Then it shows what the model gets
(summaries standing in for old turns, within the budget), and how an early
detail that is no longer in the context comes back: ``grep``, ``describe`` of
a summary, and ``expand_query``. Every caption is computed from the answers.

Runs offline (the embedded summarizer and embedder), on a fresh database
each time: a temporary directory removed at the end, or ``--db PATH`` (which
must not exist yet) to keep it for a look afterwards.

Usage: python scripts/demo.py [--db PATH] [--budget TOKENS]
"""

from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol import Client, RPCError

USER = "Maya"
ASSISTANT = "Atlas"
SESSION = "fernhill-launch"
BUDGET = 2_000
PAUSE_S = 0.3
PAUSE_EVERY = 10
"""The replay runs at machine speed but for a ``PAUSE_S`` pause every
``PAUSE_EVERY`` user turns, standing in for the time a host
waits on its model: background compaction runs when a session is quiet."""
SETTLE_S = 4.0
"""How long the demo waits for background compaction to catch up before it
asks for an explicit ``compact`` (it says which of the two made the summaries)."""
POLL_S = 0.5
"""Between two looks at the context while waiting: longer than the quiet a
session needs before background compaction starts (each request restarts it)."""

# The early facts the end of the demo asks about; each is said once, on day 1.
PORT_FACT = (
    "Noted. For the record: the staging API listens on port 8443, behind the nginx "
    "on fern-stage-01, and the health check is /healthz."
)
PORT_QUESTION = "Which port does the staging API listen on?"
WEBHOOK_FACT = (
    "One rule before we start: Priya owns payments. Ask her before anyone touches "
    "the Stripe webhooks, even in staging."
)

COMPONENTS = (
    "cart",
    "checkout",
    "search",
    "inventory sync",
    "order emails",
    "admin panel",
    "cover uploads",
    "recommendations",
    "gift cards",
    "wishlist",
    "shipping rates",
    "tax rules",
)
FILES = (
    "shop/cart.py",
    "shop/checkout.py",
    "shop/search.py",
    "shop/inventory.py",
    "shop/emails.py",
    "shop/admin.py",
)


@dataclass
class Conversation:
    """The messages to replay, grouped into user turns (what one ingest call carries)."""

    turns: list[list[dict[str, Any]]] = field(default_factory=list)
    days: list[str] = field(default_factory=list)
    _clock: int = 0
    _day: str = ""
    tool_calls: int = 0

    def day(self, date: str) -> None:
        self._day = date
        self._clock = 9 * 60
        self.days.append(date)

    def _stamp(self) -> str:
        self._clock += 2
        hours, minutes = divmod(self._clock, 60)
        return f"{self._day}T{hours:02d}:{minutes:02d}:00Z"

    def _message(self, role: str, content: str | None, **more: Any) -> dict[str, Any]:
        n = sum(len(t) for t in self.turns) + 1
        message: dict[str, Any] = {"id": f"m{n:03d}", "role": role, "content": content}
        if role == "user":
            message["name"] = USER
        elif role == "assistant":
            message["name"] = ASSISTANT
        message["created_at"] = self._stamp()
        message.update(more)
        return message

    def say(self, question: str, answer: str) -> None:
        """One user turn and the assistant's answer."""
        ask = self._message("user", question)
        self.turns.append([ask])
        self.turns[-1].append(self._message("assistant", answer))

    def tool(self, question: str, tool: str, arguments: str, output: str, answer: str) -> None:
        """A user turn answered after a tool call (OpenAI shapes, content null beside the call)."""
        self.tool_calls += 1
        call_id = f"call_{self.tool_calls:03d}"
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": tool, "arguments": arguments},
        }
        self.turns.append([self._message("user", question)])
        self.turns[-1].append(self._message("assistant", None, tool_calls=[call]))
        self.turns[-1].append(self._message("tool", output, tool_call_id=call_id, name=tool))
        self.turns[-1].append(self._message("assistant", answer))

    @property
    def messages(self) -> int:
        return sum(len(t) for t in self.turns)


def conversation() -> Conversation:
    """Four days of work on an online bookshop's relaunch, the same every run."""
    rng = random.Random(11)
    c = Conversation()
    c.day("2026-03-02")
    c.say(
        "Morning Atlas. We're relaunching the Fernhill Books shop; launch is 14 March.",
        "Morning Maya. Twelve days then. I'll keep a running list of what's left.",
    )
    c.say("Who owns what, so you know who to ask?", WEBHOOK_FACT)
    c.say("And where does staging live? I always forget.", PORT_FACT)
    for i in range(30):
        part = COMPONENTS[i % len(COMPONENTS)]
        hours = rng.randint(2, 9)
        c.say(
            f"What's the state of the {part}? Anything blocking it?",
            f"The {part} works on the old stack; porting it is about {hours} hours. "
            f"Open question {i + 1}: whether to keep its current URL scheme.",
        )
    c.day("2026-03-03")
    failures = 0
    for i in range(22):
        path = FILES[i % len(FILES)]
        failing = rng.randint(0, 3)
        failures += failing
        c.tool(
            f"Can you run the tests for {path} again?",
            "run_tests",
            f'{{"path": "{path}"}}',
            f"collected {rng.randint(20, 60)} items\n"
            + "".join(f"FAILED {path}::test_case_{k} - AssertionError\n" for k in range(failing))
            + f"{failing} failed in {rng.randint(2, 9)}.{rng.randint(0, 9)}s",
            f"{failing} failing in {path}."
            + (" Fixture dates are off by a day; fixing them." if failing else " All green."),
        )
        c.say(
            f"Good. Commit that as fix {i + 1}?",
            f"Committed: 'tests: {path} fixtures use UTC dates' ({rng.randrange(16**7):07x}).",
        )
    c.day("2026-03-04")
    for i in range(34):
        part = COMPONENTS[(i * 5) % len(COMPONENTS)]
        before, after = rng.randint(300, 900), rng.randint(40, 180)
        c.say(
            f"The {part} page feels slow. Where does the time go?",
            f"Mostly one query without an index: {before} ms at p95. With an index on "
            f"(shop_id, updated_at) it drops to {after} ms.",
        )
    c.day("2026-03-05")
    for i in range(30):
        part = COMPONENTS[(i * 7) % len(COMPONENTS)]
        c.say(
            f"Launch checklist item {i + 1}: is the {part} ready?",
            f"Yes for the {part}: migrated, load-tested at {rng.randint(50, 200)} requests/s, "
            "and the rollback is one command.",
        )
    c.say(
        "Last thing today: the deploy script needs the staging API address.",
        "Let me check what we wrote down about staging.",
    )
    return c


def show(label: str, text: str) -> None:
    print(f"\n## {label}")
    print(text)


def short(value: Any, width: int = 150) -> str:
    return textwrap.shorten(str(value).replace("\n", " "), width, placeholder=" ...")


def summary_id(xml: str) -> str:
    found = re.search(r'<summary id="(sum_[0-9a-f]+)"', xml)
    assert found is not None, xml
    return found.group(1)


def replay(client: Client, talk: Conversation, budget: int) -> int:
    """The host loop: ingest a turn, assemble under ``budget`` (the model call would follow).

    Returns how many assembles left out history that no summary in their context covered
    (a stand-in named it instead).
    """
    uncovered = 0
    for k, turn in enumerate(talk.turns):
        if k and k % PAUSE_EVERY == 0:
            time.sleep(PAUSE_S)
        client.call("ingest", {"session": SESSION, "messages": turn[:1]})
        out = client.call("assemble", {"session": SESSION, "budget": budget})
        if out["gaps"]["messages"] or out["dropped"]["messages"]:
            uncovered += 1
        if len(turn) > 1:  # what the model said and did, ingested before the next turn
            client.call("ingest", {"session": SESSION, "messages": turn[1:]})
    return uncovered


def settle(client: Client, budget: int) -> bool:
    """Whether background compaction has made history fit ``budget``: assembles until
    two in a row are the same and leave nothing out, for up to ``SETTLE_S``."""
    deadline = time.monotonic() + SETTLE_S
    previous = None
    while True:
        out = client.call("assemble", {"session": SESSION, "budget": budget})
        whole = (
            out["included"]["summaries"]
            and not any(out["dropped"].values())
            and not out["gaps"]["count"]
        )
        state = (out["tokens"], out["included"], out["fresh_tail"]) if whole else None
        if state is not None and state == previous:
            return True
        if time.monotonic() > deadline:
            return False
        previous = state
        time.sleep(POLL_S)


def main() -> int:
    """Run the demo; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="keep the demo database here (must not exist)")
    parser.add_argument("--budget", type=int, default=BUDGET, help="assemble budget (tokens)")
    args = parser.parse_args()
    if args.db is not None and (args.db.exists() or Path(f"{args.db}-files").exists()):
        print(f"error: {args.db} exists; the demo starts from a fresh database", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="brain-demo-") as scratch:
        db = args.db or Path(scratch) / "demo.db"
        return run(db, args.budget, keep=args.db is not None)


def run(db: Path, budget: int, *, keep: bool) -> int:
    """The demo on a new database at ``db``."""
    talk = conversation()
    started = time.monotonic()
    print(f"brain demo: `brain serve` on a new database {db}, spoken to over its stdio pipes")
    with Client.spawn(db, stderr=subprocess.DEVNULL) as client:
        uncovered = replay(client, talk, budget)
        info = client.call("info")
        show(
            "1. A host replays a conversation",
            f"{len(talk.turns)} user turns, {talk.messages} messages ({USER} and {ASSISTANT}, "
            f"with {talk.tool_calls} tool calls and their results) over {len(talk.days)} days "
            f"({talk.days[0]} to {talk.days[-1]}): each turn ingested, then assembled under "
            f"{budget:,} tokens, at machine speed but for a {PAUSE_S} s pause every "
            f"{PAUSE_EVERY} turns (the time a host waits on its model). "
            f"Stored: {info['messages']} messages.",
        )

        # 2. Summaries: made in the background as the host assembled, or on request.
        how = "made in the background while the host assembled"
        if not settle(client, budget):
            done = client.call("compact", {"session": SESSION, "target_tokens": budget})
            how = (
                f"after an explicit `compact` ({len(done['summaries'])} new, "
                f"context {done['tokens_before']:,} -> {done['tokens_after']:,} tokens)"
            )
        out = client.call("assemble", {"session": SESSION, "budget": budget})
        messages = out["messages"]
        summaries = [
            summary_id(m["content"]) for m in messages if str(m["content"]).startswith("<summary")
        ]
        described = [client.call("describe", {"id": s, "session": SESSION}) for s in summaries]
        covered = sum(d["subtree"]["messages"] for d in described)
        raw = len(messages) - len(summaries)
        tail, first_seq = out["fresh_tail"]["count"], out["fresh_tail"]["first_seq"]
        whole = not any(out["dropped"].values()) and not out["gaps"]["count"]
        span = {d["id"]: (d["sources"]["first_seq"], d["sources"]["last_seq"]) for d in described}
        spans = ", ".join(f"{s} seq {a}-{b}" for s, (a, b) in span.items())
        # Summaries come first, oldest first; the raw messages follow the last one.
        raw_from = max((b for _, b in span.values()), default=0) + 1
        lines = [
            f"assemble(budget={budget:,}): {out['tokens']:,} tokens used of {budget:,} "
            f"(over_budget: {str(out['over_budget']).lower()}).",
            f"Summaries: {len(summaries)}, {how}, standing for the oldest {covered} messages "
            f"({spans}); then {raw} raw messages from seq {raw_from} on, the newest {tail} of "
            f"them being the fresh tail from seq {first_seq}.",
            f"dropped: {out['dropped']['messages']} messages, {out['dropped']['summaries']} "
            "summaries"
            + (
                " (nothing of the history is left out: what is not raw, a summary covers)."
                if whole
                else " (left out for the budget)."
            ),
            f"Earlier, {uncovered} of the {len(talk.turns)} assembles during the replay had to "
            "leave out messages no summary covered yet, each run of them named by a "
            "<history_gap> stand-in the model can read them through (background compaction "
            "then starts at once instead of waiting for the session to go quiet).",
            "The context the model gets (first two and last two messages):",
        ]
        for m in [*messages[:2], *messages[-2:]]:
            who = f" {m['name']}" if m.get("name") else ""
            lines.append(f"  {m['role']}{who}: {short(m['content'])}")
        show("2. What the model sees", "\n".join(lines))

        def placed(seq: int) -> str:
            """Where message ``seq`` is in the context above."""
            if seq >= raw_from:
                return "It is raw in the context."
            holder = next((s for s, (a, b) in span.items() if a <= seq <= b), None)
            if holder is None:
                return "It is not in the context, and no summary there covers it."
            first, last = span[holder]
            return (
                f"It is not raw in the context (raw messages start at seq {raw_from}); "
                f"summary {holder} there covers it (seq {first}-{last})."
            )

        # 3. grep: an early detail, found in full.
        hits = client.call("grep", {"session": SESSION, "query": "Stripe webhooks"})["hits"]
        hit = next(h for h in hits if h["kind"] == "message")
        show(
            "3. grep 'Stripe webhooks'",
            f"{len(hits)} hit(s); the best message: {hit['id']} (seq {hit['seq']}, "
            f"{hit['name']}, {hit['created_at'][:10]}): {short(hit['snippet'], 120)}\n"
            + placed(hit["seq"]),
        )

        # 4. describe: what a summary stands for.
        first = summaries[0]
        d = client.call("describe", {"id": first, "session": SESSION})
        sources = d["sources"]
        show(
            f"4. describe {first}",
            f"a {d['summary_kind']} summary of depth {d['depth']}: messages seq "
            f"{sources['first_seq']}-{sources['last_seq']} ({d['subtree']['messages']} messages, "
            f"{d['earliest_at'][:16]} to {d['latest_at'][:16]}), {d['token_count']} tokens "
            f"standing for {d['subtree']['source_tokens']:,} tokens of source; "
            f"{len(d['children'])} child summaries.\n  {short(d['content'], 300)}",
        )

        # 5. expand_query: an early fact the context no longer holds raw.
        answer = client.call(
            "expand_query",
            {"session": SESSION, "prompt": PORT_QUESTION, "query": "staging API port"},
        )
        cites = [c["id"] for c in answer["citations"]]
        found = re.search(r"(port \d+)[^\[]*\[([^\]]+)\]", answer["answer"])
        if found is None:
            where_said = "No passage of the answer names a port."
        else:
            said = client.call("describe", {"id": found.group(2), "session": SESSION})
            where_said = (
                f"The passage saying {found.group(1)!r} is message {found.group(2)} "
                f"(seq {said['seq']}). " + placed(said["seq"])
            )
        show(
            f"5. expand_query {PORT_QUESTION!r}",
            f"mode {answer['mode']}, {answer['tokens']} tokens, citing {', '.join(cites)}:\n"
            f"  {short(answer['answer'], 400)}\n{where_said}",
        )
        client.call("shutdown")
        code = client.proc.wait(30)
    took = time.monotonic() - started
    print(f"\ndaemon exited with code {code}; the demo took {took:.1f} s")
    if keep:
        print(
            "\nthe database is kept; over a shell pipe:\n"
            f'  printf \'%s\\n\' \'{{"id":1,"method":"info"}}\' | .venv/bin/brain serve --db {db}'
        )
    return code


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RPCError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
