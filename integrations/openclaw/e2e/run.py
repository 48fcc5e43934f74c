"""Real OpenClaw turns with brain as its context engine, checked through brain.

``e2e.sh`` installs Node 24, OpenClaw and the built plugin, then runs this with
the repository's Python (the one whose ``brain`` the plugin spawns)::

    python integrations/openclaw/e2e/run.py --openclaw PREFIX/node_modules/openclaw/openclaw.mjs \\
        --node-bin NODE_BIN --plugin integrations/openclaw

It starts a scripted OpenAI-compatible model on 127.0.0.1 (tests/openai_server.py,
streaming), writes an OpenClaw config that loads the plugin from its path, puts
it in the context-engine slot and points the model provider's ``baseUrl`` at the
fake, and runs a few turns with ``openclaw agent --local --session-id S``. The
plugin's child goes through ``brain_tap.py``, which logs every request and answer
between the plugin and brain (so the run sees what brain assembled, what the
memory tool asked, and times the round trips) and loses one commit's answer on
purpose, so that the commit is retried.

The turns: two plain ones, one where the model first answers with a
context-length error while everything brain holds is inside its fresh tail
(OpenClaw compacts through the engine, which folds into the tail, and retries)
and then calls the plugin's ``memory_grep`` through OpenClaw's ``tool_call``, one
whose commit answer is lost, and a last plain one (OpenClaw retries a failed
commit at the start of its next run). brain keeps a two-message fresh tail and
folds at a small threshold, so its own compaction (finished before each run's
``dispose`` shuts brain down) folds history on plain turns too. Then it checks,
through a brain daemon on the same database and OpenClaw's own transcript and
log, and prints one JSON line (every value measured) and exits non-zero when a
check fails. The per-turn cost of brain (assemble and commit round trips, the
child's start) goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from protocol import Client  # noqa: E402
from tests.openai_server import OpenAIServer, Recorded, Reply  # noqa: E402

HERE = Path(__file__).resolve().parent
ENGINE_LINE = re.compile(r'context engine "([^"]+)" owns compaction')
LEGACY_LINES = (
    re.compile(r'degraded to "legacy"'),
    re.compile(r"context engine assemble failed, using pipeline messages"),
    re.compile(r"quarantin", re.IGNORECASE),
    re.compile(r"downgraded to legacy"),
    # The plugin's own fallback: brain failed, the turn went on with the host's messages.
    re.compile(r"this turn uses the host's messages"),
    # What the plugin sees of OpenClaw's: a turn brain never got, another engine selected.
    re.compile(r"a turn brain never received"),
    re.compile(r"plugins\.slots\.contextEngine selects"),
)
FILLER = (
    "Notes for the record: the staging cluster rotates its certificates on Mondays, "
    "the release train leaves on Thursdays at noon, backups are verified nightly, "
    "and every incident gets a written review within two working days. "
)


@dataclass
class Turn:
    """One `openclaw agent` run: its prompt and what the scripted model says."""

    index: int
    prompt: str
    user_marker: str
    reply_marker: str
    tool: bool = False
    drop_commit: bool = False
    overflow: bool = False  # the model's first answer is a context-length error
    env: dict[str, str] = field(default_factory=dict)  # brain's settings for this run


@dataclass
class Script:
    """The fake model: answers each request from the conversation it is sent."""

    turns: list[Turn]
    tool_name: str
    tool_args: dict[str, Any]
    calls: list[dict[str, Any]] = field(default_factory=list)
    overflowed: set[int] = field(default_factory=set)

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        messages = body.get("messages") or []
        turn = self._turn(messages)
        if turn is None:  # a request that is not one of the turns (none seen so far)
            return Reply.text("ok")
        if turn.overflow and turn.index not in self.overflowed:
            # What OpenAI answers a prompt over the window: OpenClaw then asks the
            # context engine to compact and sends the turn again.
            self.overflowed.add(turn.index)
            return Reply.error(
                400,
                "This model's maximum context length is 32000 tokens. However, your "
                "messages resulted in 40123 tokens. Please reduce the length of the messages.",
            )
        after = messages[self._prompt_position(messages, turn) + 1 :]
        if turn.tool and not any(m.get("role") == "tool" for m in after):
            # Letters and digits only: OpenClaw rewrites other characters out of call ids.
            call_id = f"call{turn.index}x{secrets.token_hex(3)}"
            self.calls.append({"turn": turn.index, "id": call_id})
            return Reply.tool_call(
                "tool_call", {"id": self.tool_name, "args": self.tool_args}, call_id=call_id
            )
        return Reply.text(f"{turn.reply_marker} understood. {FILLER}")

    def _turn(self, messages: list[dict[str, Any]]) -> Turn | None:
        """The turn whose prompt is the newest one in the request."""
        text = _text(messages)
        for turn in reversed(self.turns):
            if turn.user_marker in text:
                return turn
        return None

    @staticmethod
    def _prompt_position(messages: list[dict[str, Any]], turn: Turn) -> int:
        for i in range(len(messages) - 1, -1, -1):
            if turn.user_marker in _text([messages[i]]):
                return i
        return len(messages) - 1


def _text(value: Any) -> str:
    """Every string inside a JSON value, joined (what a model request or answer says)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(_text(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_text(v) for v in value)
    return ""


def _said(value: Any) -> str:
    """``_text`` without tool results (an OpenAI ``tool`` message, an Anthropic
    ``tool_result`` block): what the conversation itself says.

    A tool result may quote any earlier turn (a `memory_grep` answer quoting turn
    1), and the turn in flight's come from the tool, not from brain's assemble.
    """
    if isinstance(value, dict):
        if value.get("role") == "tool" or value.get("type") == "tool_result":
            return ""
        return "\n".join(_said(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(_said(v) for v in value)
    return value if isinstance(value, str) else ""


def make_turns(nonce: str) -> list[Turn]:
    """The scripted conversation (markers carry a nonce: nothing else can contain them)."""
    # (prompt, tool call, commit answer lost, context-length error first). The
    # overflow's run keeps a four-message tail: everything brain holds then (turns
    # 1 and 2) is inside it, nothing outside is left to fold, and OpenClaw's
    # compact through the engine succeeds only by folding into the tail (before
    # brain's fold_tail, OpenClaw failed the turn). Its fold threshold is low
    # enough that the tool turn's commit passes it, and brain's own compaction
    # folds it before that run ends: the next turns see its summary.
    specs = [
        ("The deploy key lives in vault/ci; remember where it is.", False, False, False),
        ("Write down the release schedule for later.", False, False, False),
        ("Where does the deploy key live? Search your memory. CALL_TOOL", True, False, True),
        ("Summarise what we agreed about incidents.", False, True, False),
        ("Thanks, that is all for today.", False, False, False),
    ]
    turns = []
    for i, (text, tool, drop, overflow) in enumerate(specs, start=1):
        user = f"TURN{i}x{nonce}"
        turns.append(
            Turn(
                index=i,
                prompt=f"{user} {text} {FILLER}",
                user_marker=user,
                reply_marker=f"REPLY{i}x{nonce}",
                tool=tool,
                drop_commit=drop,
                overflow=overflow,
                env=OVERFLOW_ENV if overflow else {},
            )
        )
    return turns


# The overflow's run: turns 1 and 2 (four messages) all in the tail.
OVERFLOW_ENV = {"BRAIN_FRESH_TAIL_COUNT": "4", "BRAIN_COMPACTION_THRESHOLD_TOKENS": "100"}


def write_config(
    path: Path, *, base_url: str, plugin: Path, tap: Path, db: Path, workspace: Path, log: Path
) -> None:
    """OpenClaw's config: the fake model, the plugin from its path in the context-engine slot."""
    config = {
        "agents": {
            "defaults": {"model": {"primary": "fake/fake-model"}, "workspace": str(workspace)}
        },
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": base_url,
                    "apiKey": "sk-fake",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-model",
                            "name": "Fake",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 32000,
                            "maxTokens": 1024,
                        }
                    ],
                }
            },
        },
        "logging": {"file": str(log)},
        "plugins": {
            "load": {"paths": [str(plugin)]},
            "slots": {"contextEngine": "brain"},
            "entries": {"brain": {"enabled": True, "config": {"command": str(tap), "db": str(db)}}},
        },
    }
    path.write_text(json.dumps(config, indent=2))


def read_tap(path: Path) -> list[dict[str, Any]]:
    """The tap's records, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def round_trips(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each request with its answer (same tap process, same id): method, params, answer, ms.

    A trip whose answer the tap withheld is marked ``dropped``.
    """
    pending: dict[tuple[int, Any], dict[str, Any]] = {}
    answered: dict[tuple[int, Any], dict[str, Any]] = {}
    done = []
    for rec in records:
        line = rec.get("line") or {}
        key = (rec["pid"], line.get("id"))
        if rec["dir"] == "request" and "method" in line and line.get("id") is not None:
            pending[key] = {
                "method": line["method"],
                "params": line.get("params"),
                "t": rec["t"],
                "pid": rec["pid"],
                "dropped": False,
            }
        elif rec["dir"] == "answer" and key in pending:
            trip = pending.pop(key)
            trip["answer"] = line
            trip["ms"] = (rec["t"] - trip["t"]) * 1000
            answered[key] = trip
            done.append(trip)
        elif rec["dir"] == "dropped" and key in answered:
            answered[key]["dropped"] = True
    return done


def starts(records: list[dict[str, Any]]) -> list[float]:
    """Per tap process: ms from its start to brain's first answer (the child's start-up)."""
    began: dict[int, float] = {}
    first: dict[int, float] = {}
    for rec in records:
        if rec["dir"] == "start":
            began[rec["pid"]] = rec["t"]
        elif rec["dir"] == "answer" and rec["pid"] in began and rec["pid"] not in first:
            first[rec["pid"]] = (rec["t"] - began[rec["pid"]]) * 1000
    return list(first.values())


def host_messages(state: Path) -> list[dict[str, Any]]:
    """The message entries of OpenClaw's own transcript (its SQLite store), in order."""
    found = []
    for db in sorted(state.glob("agents/*/agent/openclaw-agent.sqlite")):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute(
                "SELECT event_json, navigation_json FROM transcript_events ORDER BY session_id, seq"
            ).fetchall()
        finally:
            con.close()
        for raw, navigation in rows:
            # A large event is stored zstd-compressed; its navigation record still
            # says what it is (type, role), which is all the count needs.
            event = json.loads(raw) if raw is not None else json.loads(navigation)["navigation"]
            if event.get("type") == "message":
                found.append(event["message"])
    return found


def pending_commits(state: Path) -> int:
    """Turn commits OpenClaw still has queued (failed and not yet retried)."""
    total = 0
    for db in state.glob("agents/*/agent/openclaw-agent.sqlite"):
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            total += con.execute("SELECT count(*) FROM context_engine_turn_outbox").fetchone()[0]
        finally:
            con.close()
    return total


def run_turn(
    openclaw: list[str], env: dict[str, str], session: str, turn: Turn, logs: Path
) -> tuple[int, tuple[float, float], str]:
    """One `openclaw agent --local` run: its exit code, (start, end) wall clock, stderr."""
    started = time.time()
    argv = [*openclaw, "agent", "--local", "--session-id", session, "--message", turn.prompt]
    proc = subprocess.run(
        [*argv, "--json"],
        env={**env, **turn.env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    (logs / f"turn{turn.index}.out.json").write_text(proc.stdout)
    (logs / f"turn{turn.index}.err.log").write_text(proc.stderr)
    return proc.returncode, (started, time.time()), proc.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openclaw", required=True, help="path to openclaw.mjs")
    parser.add_argument("--node-bin", required=True, help="directory holding node >= 24.16")
    parser.add_argument("--plugin", required=True, help="the built plugin's directory")
    parser.add_argument("--work", help="keep the run's files here (default: a temporary dir)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="brain-openclaw-e2e-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    result, failures = run(args, work)
    print(json.dumps(result), flush=True)
    for failure in failures:
        print(f"e2e: FAILED: {failure}", file=sys.stderr)
    if failures or args.work:
        print(f"e2e: files kept in {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def run(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], list[str]]:
    """Run the turns and the checks; the result line and the failed checks."""
    state, logs, workspace = work / "state", work / "logs", work / "workspace"
    for d in (state, logs, workspace):
        d.mkdir(parents=True, exist_ok=True)
    db = work / "brain.db"
    tap_log = work / "tap.jsonl"
    drop_flag = work / "drop-next-commit-answer"
    tap = work / "brain-tap"
    tap.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "brain_tap.py"}" "$@"\n')
    tap.chmod(0o755)
    brain = Path(sys.executable).parent / "brain"
    nonce = secrets.token_hex(4)
    turns = make_turns(nonce)
    script = Script(turns, "memory_grep", {"query": "deploy key vault"})
    session = f"e2e-{nonce}"
    env = {
        **os.environ,
        "PATH": f"{args.node_bin}:{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "OPENCLAW_STATE_DIR": str(state),
        "OPENCLAW_CONFIG_PATH": str(state / "openclaw.json"),
        "BRAIN_TAP_BRAIN": str(brain),
        "BRAIN_TAP_LOG": str(tap_log),
        "BRAIN_TAP_DROP_ONCE": str(drop_flag),
        # A two-message fresh tail and a small threshold: a few turns are enough to fold.
        "BRAIN_FRESH_TAIL_COUNT": "2",
        "BRAIN_COMPACTION_THRESHOLD_TOKENS": "300",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    openclaw = [str(Path(args.node_bin) / "node"), args.openclaw]
    version = subprocess.run(
        [*openclaw, "--version"], env=env, capture_output=True, text=True, check=False
    ).stdout.strip()
    failures: list[str] = []
    stderr_all = ""
    windows: list[tuple[float, float]] = []
    with OpenAIServer(responder=script) as model:
        write_config(
            state / "openclaw.json",
            base_url=model.base_url,
            plugin=Path(args.plugin).resolve(),
            tap=tap,
            db=db,
            workspace=workspace,
            log=logs / "openclaw.log",
        )
        for turn in turns:
            if turn.drop_commit:
                drop_flag.write_text("1")
            code, window, err = run_turn(openclaw, env, session, turn, logs)
            windows.append(window)
            stderr_all += err
            seconds = window[1] - window[0]
            print(f"e2e: turn {turn.index} exit {code} in {seconds:.1f} s", file=sys.stderr)
            if code != 0:
                failures.append(f"turn {turn.index}: openclaw exited {code} (logs/turn*.err.log)")
        requests = [(r.at, r.json()) for r in model.requests if r.path.endswith("/completions")]
    with (logs / "model_requests.jsonl").open("w") as out:
        for at, body in requests:
            out.write(json.dumps({"at": at, "body": body}) + "\n")
    file_log = (logs / "openclaw.log").read_text() if (logs / "openclaw.log").exists() else ""
    records = read_tap(tap_log)
    trips = round_trips(records)
    checks = Checks(turns, windows, requests, trips, host_messages(state), db, script)
    result = {
        "openclaw": version.split()[1] if len(version.split()) > 1 else version,
        "turns": len(turns),
        **checks.engine(stderr_all + "\n" + file_log, len(turns)),
        **checks.storage(),
        "retry_duplicates": checks.retry(pending_commits(state), drop_flag),
        "model_saw_context": checks.context(),
        "model_saw_summary": checks.summary(),
        "overflow_folded_tail": checks.overflow(),
        "tool_roundtrip": checks.tool(),
    }
    failures += checks.failures
    overhead(records, trips, [end - start for start, end in windows])
    return result, failures


class Checks:
    """The measurements behind the result line; each records why it failed."""

    def __init__(
        self,
        turns: list[Turn],
        windows: list[tuple[float, float]],
        requests: list[tuple[float, dict[str, Any]]],
        trips: list[dict[str, Any]],
        host: list[dict[str, Any]],
        db: Path,
        script: Script,
    ) -> None:
        self.turns = turns
        self.windows = windows
        self.timed = requests
        self.requests = [body for _, body in requests]
        self.trips = trips
        self.host = host
        self.db = db
        self.script = script
        self.failures: list[str] = []

    def fail(self, why: str) -> bool:
        self.failures.append(why)
        return False

    def engine(self, log: str, turns: int) -> dict[str, Any]:
        """Which engine OpenClaw says ran each turn, and how often it fell back to legacy."""
        engines = ENGINE_LINE.findall(log)
        fallbacks = sum(len(p.findall(log)) for p in LEGACY_LINES)
        # brain really ran each turn: it answered an assemble during each run.
        assembling = [
            w for w in self.windows if any(self._in(t, w, "assemble") for t in self.trips)
        ]
        ids = set(engines)
        engine = ids.pop() if len(ids) == 1 else ",".join(sorted(set(engines))) or "none"
        # The log line comes from OpenClaw's stderr and its file log: count each turn once.
        per_turn = len(engines) // 2 if len(engines) >= 2 * turns else len(engines)
        if per_turn < turns:
            self.fail(f"the engine line appeared for {per_turn} of {turns} turns")
        if len(assembling) < turns:
            self.fail(f"brain answered assemble in {len(assembling)} runs of {turns}")
        if fallbacks:
            self.fail(f"{fallbacks} legacy fallback lines in OpenClaw's log")
        return {"engine": engine, "legacy_fallbacks": fallbacks}

    def storage(self) -> dict[str, Any]:
        """Every message of the host's transcript stored in brain, none of them twice."""
        with Client.spawn(self.db, stderr=subprocess.DEVNULL) as brain:
            info = brain.call("info")
            twice = 0
            missing = []
            for turn in self.turns:
                for marker, role in ((turn.user_marker, "user"), (turn.reply_marker, "assistant")):
                    hits = brain.call(
                        "grep",
                        {"query": marker, "mode": "regex", "all": True, "scope": "messages"},
                    )["hits"]
                    # Its own message starts with the marker; a tool result quoting it
                    # (the grep answer) or a summary does not.
                    own = [
                        h
                        for h in hits
                        if h.get("role") == role
                        and re.sub(r"[\[\]]", "", str(h.get("snippet"))).startswith(marker)
                    ]
                    if not own:
                        missing.append(marker)
                    twice += max(0, len(own) - 1)
        stored = int(info["messages"])
        expected = len(self.host)
        if missing:
            self.fail(f"not stored in brain: {missing}")
        if stored != expected:
            self.fail(f"brain holds {stored} messages, OpenClaw's transcript {expected}")
        twice += max(0, stored - expected)
        if twice:
            self.fail(f"{twice} messages stored twice")
        return {"messages_stored": stored, "stored_twice": twice}

    def retry(self, queued: int, flag: Path) -> bool:
        """The commit whose answer was lost was sent again and brain answered duplicate."""
        dropped = [t for t in self.trips if t.get("dropped")]
        if not dropped or flag.exists():
            return self.fail("no commit answer was dropped (the fault was not injected)")
        ids = _message_ids(dropped[0])
        later = [
            t
            for t in self.trips
            if t["method"] == "ingest" and t["t"] > dropped[0]["t"] and _message_ids(t) == ids
        ]
        if not later:
            return self.fail("the commit whose answer was lost was never sent again")
        result = later[0]["answer"].get("result") or {}
        if result.get("ingested") != 0 or result.get("duplicates") != len(ids):
            return self.fail(f"the retried commit was not all duplicates: {result}")
        if queued:
            return self.fail(f"{queued} commits still queued in OpenClaw's outbox")
        return True

    @staticmethod
    def _in(trip: dict[str, Any], window: tuple[float, float], method: str) -> bool:
        return bool(trip["method"] == method and window[0] <= trip["t"] <= window[1])

    def _last_assemble_before(self, request_index: int) -> dict[str, Any] | None:
        """Brain's assemble answer that the model request at that index was built from:
        the last one answered in that turn's run before the request arrived."""
        at, body = self.timed[request_index]
        turn = self.script._turn(body.get("messages") or [])
        if turn is None:
            return None
        window = self.windows[turn.index - 1]
        mine = [
            t
            for t in self.trips
            if self._in(t, window, "assemble") and t["t"] + t["ms"] / 1000 <= at
        ]
        return mine[-1] if mine else None

    def context(self) -> bool:
        """The model saw what brain assembled: earlier turns' markers appear in the
        request exactly when brain's assemble answer carried them (raw or in a summary)."""
        checked = 0
        for i, request in enumerate(self.requests):
            trip = self._last_assemble_before(i)
            turn = self.script._turn(request.get("messages") or [])
            if trip is None or turn is None or turn.index == 1:
                continue
            # Compared without tool results: the turn in flight's come from the tool.
            assembled = _said((trip["answer"].get("result") or {}).get("messages"))
            sent = _said(request.get("messages"))
            for earlier in self.turns[: turn.index - 1]:
                for marker in (earlier.user_marker, earlier.reply_marker):
                    if (marker in assembled) != (marker in sent):
                        return self.fail(
                            f"turn {turn.index}: {marker} in brain's context "
                            f"{marker in assembled}, in the model request {marker in sent}"
                        )
            if not assembled:
                return self.fail(f"turn {turn.index}: brain assembled nothing")
            checked += 1
        if not checked:
            return self.fail("no model request could be matched with brain's assemble")
        return True

    def summary(self) -> bool:
        """A model request carried one of brain's XML summaries, and a plain turn's
        request carried one that brain's own compaction made (not one of those the
        engine's `compact`, called by OpenClaw's overflow recovery, answered with)."""
        summary = re.compile(r'<summary id="(sum_[0-9a-f]+)"')
        seen = [
            (r, set(summary.findall(_text(r.get("messages")))))
            for r in self.requests
            if summary.search(_text(r.get("messages")))
        ]
        if not seen:
            return self.fail("no model request contained a <summary id=...> from brain")
        explicit = {
            str(sid)
            for t in self.trips
            if t["method"] == "compact"
            for sid in ((t["answer"].get("result") or {}).get("summaries") or [])
        }
        for request, ids in seen:
            turn = self.script._turn(request.get("messages") or [])
            if turn is not None and not turn.overflow and ids - explicit:
                return True
        return self.fail(
            "no plain turn's model request carried a summary made by brain's own "
            "compaction (only the overflow path's compact folded history)"
        )

    def overflow(self) -> bool:
        """On the overflow turn nothing outside brain's fresh tail was left to fold (the
        plugin's sweep folded nothing), and the plugin's `compact` with `fold_tail`
        folded into the tail, so OpenClaw's retry went on (the run's exit is checked
        with the others)."""
        turn = next(t for t in self.turns if t.overflow)
        window = self.windows[turn.index - 1]
        compacts = [t for t in self.trips if self._in(t, window, "compact")]
        sweeps = [t for t in compacts if not (t.get("params") or {}).get("fold_tail")]
        tails = [t for t in compacts if (t.get("params") or {}).get("fold_tail")]
        if not sweeps:
            return self.fail(f"turn {turn.index}: OpenClaw's recovery never called compact")
        swept = (sweeps[0]["answer"].get("result") or {}).get("summaries")
        if swept != []:
            return self.fail(
                f"turn {turn.index}: the sweep folded {swept}: the overflow did not come "
                "with everything outside the tail folded"
            )
        folded = [(t["answer"].get("result") or {}).get("summaries") for t in tails]
        if not any(folded):
            return self.fail(f"turn {turn.index}: no compact with fold_tail folded: {folded}")
        return True

    def tool(self) -> bool:
        """The plugin's memory tool asked brain, and the model got brain's answer back."""
        asked = self.script.tool_args.get("query")
        grep = [
            t
            for t in self.trips
            if t["method"] == "grep" and (t.get("params") or {}).get("query") == asked
        ]
        if not grep:
            return self.fail("the plugin never sent grep to brain")
        hits = (grep[-1]["answer"].get("result") or {}).get("hits") or []
        if not hits:
            return self.fail("brain's grep for the tool found nothing")
        call_ids = {_alnum(c["id"]) for c in self.script.calls}
        for request in self.requests:
            for message in request.get("messages") or []:
                answered = _alnum(message.get("tool_call_id")) in call_ids
                if message.get("role") == "tool" and answered:
                    content = _text(message.get("content"))
                    if any(str(h.get("id")) in content for h in hits):
                        return True
        return self.fail("no tool result the model received carried brain's grep hit ids")


def _alnum(value: Any) -> str:
    return re.sub(r"[^0-9A-Za-z]", "", str(value))


def _message_ids(trip: dict[str, Any]) -> list[str]:
    params = trip.get("params") or {}
    messages = params.get("messages") or ([params["message"]] if "message" in params else [])
    return [str(m.get("id")) for m in messages]


def overhead(records: list[dict[str, Any]], trips: list[dict[str, Any]], took: list[float]) -> None:
    """Print what brain costs a turn, as the tap saw it: each method's round trips once
    the child is up, the child's start (paid by the first call of every run, since
    each `openclaw agent --local` is a new process), and per turn the assembles and
    the commit together."""
    out = sys.stderr
    first: dict[int, dict[str, Any]] = {}
    for t in trips:
        first.setdefault(t["pid"], t)
    warm = [t for t in trips if first[t["pid"]] is not t]
    print("e2e: brain round trips at the tap (plugin <-> brain serve), warm, ms:", file=out)
    for method in sorted({t["method"] for t in warm}):
        values = [t["ms"] for t in warm if t["method"] == method]
        print(
            f"e2e:   {method}: n={len(values)} median {statistics.median(values):.1f}"
            f" max {max(values):.1f}",
            file=out,
        )
    spawned = starts(records)
    if spawned:
        print(
            f"e2e:   a run's first call, child start included: n={len(spawned)} median"
            f" {statistics.median(spawned):.1f} max {max(spawned):.1f}",
            file=out,
        )
    per_turn = []
    for pid in {t["pid"] for t in trips if t["method"] == "assemble"}:
        mine = [t for t in warm if t["pid"] == pid and t["method"] in ("assemble", "ingest")]
        per_turn.append(sum(t["ms"] for t in mine))
    if per_turn:
        print(
            f"e2e:   per turn, warm assembles + commit: median {statistics.median(per_turn):.1f}"
            f" max {max(per_turn):.1f} ({len(per_turn)} runs)",
            file=out,
        )
    print("e2e: openclaw agent runs took " + ", ".join(f"{s:.1f}" for s in took) + " s", file=out)


if __name__ == "__main__":
    sys.exit(main())
