"""Retrieval quality on LoCoMo: evidence-turn recall@k, MRR and session recall per grep mode.

Usage::

    python scripts/eval_locomo.py DATA.json --json [--modes full_text,regex] [--db PATH] [--cv]

Each sample (conversation) is ingested through the daemon protocol as one
session named by its ``sample_id``: every turn becomes a message whose ``id``
is its ``dia_id``, ``name`` its speaker, ``created_at`` its session's date and
time (plus one second per turn, to keep the order), and whose content is the
turn's text with ``[image: caption]`` appended when it shares an image. The
daemon runs with ``--auto-compact false`` so only raw messages are searched.

Every question then goes through ``grep`` (``scope: messages``, limit 50,
within its own conversation) in each requested mode, and the returned message
ids are scored against the question's evidence ``dia_id``s, as in the LoCoMo
paper: per question, recall@k is the share of its evidence turns in the top
k, averaged over questions; recall_all@k counts a question only when all of
its evidence is in the top k; MRR uses the first evidence turn's rank (0 when
none is returned); session recall@k is the share of the evidence's sessions
among the sessions of the top k turns. Figures are given for all questions,
per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial) and for all but category 5.

Evidence ids are extracted with ``D\\d+:\\d+`` (a few are malformed, e.g.
``"D8:6; D9:17"``), normalised (``D30:05`` -> ``D30:5``); ids missing from
their conversation are dropped, and questions left without evidence are
skipped. Both counts are reported.

Graph modes (``query``, ``query_learned``, ``query_learned:outcomes``,
``query_learned:corrections``) load each conversation into its own database by
``sync`` of a generated workspace file (a ``## Session N (date)`` section per
session, a ``### <dia_id>`` section, so one chunk node, per turn) and rank the
fired chunk nodes; see ``run_graph_mode``.
They score the odd-numbered questions (1st, 3rd, ...) of each conversation; with any
graph mode, ``hybrid@graph_questions`` is ranked hybrid grep on exactly those questions.

``hybrid`` and ``full_text`` go through grep's learned ranking stage (the shipped
weights: on dev they are the training data, so that figure is optimistic);
``hybrid:norank`` / ``full_text:norank`` turn it off. ``--cv`` adds the figures that
count, the stage trained on four conversations and scored on the fifth in every
rotation (``hybrid:cv``, ``full_text:cv``), and the shuffled-label controls.

With ``--json`` one JSON object goes to stdout (recalls in percent; a mode the
daemon refuses is reported as ``{"error": ...}``); the tables go to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from protocol.client import Client
from protocol.errors import RPCError

ROOT: Final = Path(__file__).resolve().parent.parent
KS: Final = (5, 10, 25, 50)
LIMIT: Final = 50
BATCH: Final = 200
CATEGORIES: Final = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}
_EVIDENCE: Final = re.compile(r"D(\d+):(\d+)")
_DIA: Final = re.compile(r"^D(\d+):(\d+)$")
_DATE: Final = re.compile(
    r"^\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*$",
    re.IGNORECASE,
)


# -- data ---------------------------------------------------------------------------


def _month_number(name: str) -> int | None:
    """1-12 for an English month name or its abbreviation (``Sept`` too), else None."""
    if name.lower() == "sept":
        return 9
    for pattern in ("%B", "%b"):
        try:
            return datetime.strptime(name, pattern).month
        except ValueError:
            continue
    return None


def parse_locomo_date(text: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` as a naive datetime (None if it does not parse)."""
    m = _DATE.match(text)
    if m is None:
        return None
    hour, minute, half, day, month_name, year = m.groups()
    month = _month_number(month_name)
    if month is None:
        return None
    h = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    try:
        return datetime(int(year), month, int(day), h, int(minute))
    except ValueError:
        return None


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC with a ``Z`` (the dates carry no zone; UTC is as good as any)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def normalise_dia_id(raw: str) -> str | None:
    """``D30:05`` -> ``D30:5``; None when it is not a dia id."""
    m = _DIA.match(raw.strip())
    return None if m is None else f"D{int(m.group(1))}:{int(m.group(2))}"


def session_of(dia_id: str) -> str:
    """The session part of a dia id: ``D8:6`` -> ``D8``."""
    return dia_id.split(":", 1)[0]


def turn_text(turn: dict[str, Any]) -> str:
    """The turn's text, with its image caption appended when it shares one."""
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {caption}]" if text else f"[image: {caption}]"
    return text


def session_keys(conversation: dict[str, Any]) -> list[str]:
    """The ``session_N`` keys holding turn lists, in session order."""
    keys = [
        k
        for k, v in conversation.items()
        if re.fullmatch(r"session_\d+", k) and isinstance(v, list) and v
    ]
    return sorted(keys, key=lambda k: int(k.split("_")[1]))


def messages_of(sample: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The sample's turns as protocol messages, and how many session dates did not parse."""
    conversation = sample["conversation"]
    speakers = [conversation.get("speaker_a"), conversation.get("speaker_b")]
    messages: list[dict[str, Any]] = []
    bad_dates = 0
    seen: set[str] = set()
    for key in session_keys(conversation):
        date = parse_locomo_date(str(conversation.get(f"{key}_date_time") or ""))
        if date is None:
            bad_dates += 1
        for i, turn in enumerate(conversation[key]):
            dia = normalise_dia_id(str(turn.get("dia_id", ""))) or str(turn.get("dia_id", ""))
            if not dia or dia in seen:
                continue  # a turn without a usable id cannot be scored against
            seen.add(dia)
            speaker = str(turn.get("speaker") or "")
            msg: dict[str, Any] = {
                "id": dia,
                "role": "assistant" if speaker and speaker == speakers[1] else "user",
                "content": turn_text(turn),
            }
            if speaker:
                msg["name"] = speaker
            if date is not None:
                msg["created_at"] = iso(date + timedelta(seconds=i))
            messages.append(msg)
    return messages, bad_dates


@dataclass(slots=True)
class Question:
    """One scored question: its conversation, text, category and evidence turns."""

    sample_id: str
    question: str
    category: str
    evidence: tuple[str, ...]


@dataclass(slots=True)
class Dataset:
    """The questions to score, and what had to be skipped along the way."""

    questions: list[Question] = field(default_factory=list)
    skipped_evidence_ids: int = 0
    skipped_questions: int = 0
    malformed_evidence_fields: int = 0


def questions_of(samples: Sequence[dict[str, Any]]) -> Dataset:
    """Every question with at least one evidence turn present in its conversation."""
    data = Dataset()
    for sample in samples:
        conversation = sample["conversation"]
        known = {
            normalise_dia_id(str(t.get("dia_id", "")))
            for k in session_keys(conversation)
            for t in conversation[k]
        }
        for qa in sample.get("qa", []):
            ids: list[str] = []
            for raw in qa.get("evidence") or []:
                found = _EVIDENCE.findall(str(raw))
                if len(found) != 1 or normalise_dia_id(str(raw)) is None:
                    data.malformed_evidence_fields += 1
                ids += [f"D{int(s)}:{int(t)}" for s, t in found]
            unique = list(dict.fromkeys(ids))
            present = tuple(i for i in unique if i in known)
            data.skipped_evidence_ids += len(unique) - len(present)
            if not present or not str(qa.get("question") or "").strip():
                data.skipped_questions += 1
                continue
            data.questions.append(
                Question(
                    str(sample["sample_id"]),
                    str(qa["question"]),
                    str(qa.get("category", "?")),
                    present,
                )
            )
    return data


# -- scoring ------------------------------------------------------------------------


def score_question(ranked: Sequence[str], evidence: Iterable[str]) -> dict[str, float]:
    """Per-question figures (fractions, not percent) for a ranked list of turn ids."""
    gold = set(evidence)
    gold_sessions = {session_of(e) for e in gold}
    out: dict[str, float] = {}
    for k in KS:
        top = set(ranked[:k])
        found = len(gold & top)
        out[f"recall@{k}"] = found / len(gold)
        out[f"recall_all@{k}"] = float(found == len(gold))
        sessions = {session_of(r) for r in ranked[:k]}
        out[f"session_recall@{k}"] = len(gold_sessions & sessions) / len(gold_sessions)
    rr = 0.0
    for rank, turn in enumerate(ranked, start=1):
        if turn in gold:
            rr = 1.0 / rank
            break
    out["mrr"] = rr
    return out


METRICS: Final = (
    *(f"recall@{k}" for k in KS),
    *(f"recall_all@{k}" for k in KS),
    "mrr",
    *(f"session_recall@{k}" for k in KS),
)


def aggregate(rows: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Means over questions: recalls in percent (1 decimal), MRR as a fraction (3)."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        mean = sum(r[metric] for r in rows) / len(rows) if rows else 0.0
        out[metric] = round(mean, 3) if metric == "mrr" else round(100 * mean, 1)
    out["questions"] = len(rows)
    return out


def summarise(questions: Sequence[Question], rows: Sequence[dict[str, float]]) -> dict[str, Any]:
    """Overall figures, plus ``by_category`` (each category and ``all_but_5``)."""
    by_cat: dict[str, list[dict[str, float]]] = defaultdict(list)
    for q, r in zip(questions, rows, strict=True):
        by_cat[q.category].append(r)
    result = aggregate(rows)
    cats = {c: aggregate(by_cat[c]) for c in sorted(by_cat)}
    cats["all_but_5"] = aggregate(
        [r for q, r in zip(questions, rows, strict=True) if q.category != "5"]
    )
    result["by_category"] = cats
    return result


# -- running ------------------------------------------------------------------------


def ingest_all(client: Client, samples: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Ingest every sample as one session; counts of turns, duplicates and bad dates."""
    totals = {"turns": 0, "ingested": 0, "duplicates": 0, "unparsed_session_dates": 0}
    for sample in samples:
        messages, bad_dates = messages_of(sample)
        totals["turns"] += len(messages)
        totals["unparsed_session_dates"] += bad_dates
        for start in range(0, len(messages), BATCH):
            result = client.call(
                "ingest",
                {"session": str(sample["sample_id"]), "messages": messages[start : start + BATCH]},
                timeout=300,
            )
            totals["ingested"] += int(result.get("ingested", 0))
            totals["duplicates"] += int(result.get("duplicates", 0))
    return totals


def wait_for_embeddings(client: Client, timeout_s: float = 900.0) -> float:
    """Poll semantic grep until nothing waits to be embedded; the seconds it took."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        result = client.call("grep", {"query": "x", "mode": "semantic", "all": True, "limit": 1})
        if int(result.get("pending", 0)) == 0:
            break
        time.sleep(0.2)
    return time.perf_counter() - started


def wait_for_entities(client: Client, timeout_s: float = 900.0) -> float:
    """Poll ``info`` until the entity index has no backlog (the daemon drains it in the
    background after embedding); the seconds it took. grep's entity features count
    only indexed messages."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if int(client.call("info").get("entities_pending", 0)) == 0:
            break
        time.sleep(0.2)
    return time.perf_counter() - started


def grep_params(mode: str, question: Question) -> dict[str, Any]:
    """The grep request for ``question`` in ``mode`` (see ``run_mode`` for the options).

    A named fusion turns the ranking stage off: the stage reads the weighted
    fusion's scores and replaces its order, so with it on every fusion ranks alike.
    """
    mode, _, option = mode.partition(":")
    params: dict[str, Any] = {
        "query": question.question,
        "mode": mode,
        "session": question.sample_id,
        "scope": "messages",
        "limit": LIMIT,
    }
    if option in ("rrf", "weighted"):
        params["fusion"] = option
    if option in ("rrf", "weighted", "norank"):
        params["rank"] = False
    return params


def run_mode(client: Client, mode: str, questions: Sequence[Question]) -> dict[str, Any]:
    """Grep every question in ``mode`` and score it; ``{"error": ...}`` if the mode is refused.

    ``mode`` may name a fusion for hybrid search: ``hybrid:rrf``, ``hybrid:weighted``
    (both without the ranking stage's order, which replaces the fusion's), or turn the
    ranking stage off: ``hybrid:norank``, ``full_text:norank``.
    """
    rows: list[dict[str, float]] = []
    failed = 0
    started = time.perf_counter()
    for i, q in enumerate(questions):
        params = grep_params(mode, q)
        try:
            result = client.call("grep", params)
        except RPCError as exc:
            if i == 0 and exc.code == -32602 and "mode" in exc.message:
                return {"error": f"{exc.code}: {exc.message}"}
            failed += 1  # e.g. a question with no words, or an invalid regex: nothing found
            result = {"hits": []}
        ranked = [h["id"] for h in result.get("hits", []) if h.get("kind", "message") == "message"]
        rows.append(score_question(ranked, q.evidence))
    out = summarise(questions, rows)
    out["failed_queries"] = failed
    out["grep_seconds"] = round(time.perf_counter() - started, 2)
    return out


# -- the learned graph: query and query_learned --------------------------------------

GRAPH_MODES: Final = (
    "query",
    "query_learned",
    "query_learned:outcomes",
    "query_learned:corrections",
)
GRAPH_QUERY: Final = {"top_k": 100, "threshold": 0.001, "max_fired": 150, "max_chars": 1_000_000}
"""Query knobs for scoring: 50 seeds that all fire, room for what spreads from them, and
every fired node shown (so each maps to its turn)."""
GRAPH_BASELINE: Final = "hybrid@graph_questions"
"""Ranked hybrid grep on the questions the graph modes score, printed beside them."""
HIT_K: Final = 10
"""A replayed question counts as answered (+1) when an evidence turn is in its top 10."""
REPLAY_QUERY: Final = {
    "top_k": HIT_K,
    "threshold": 0.001,
    "max_fired": HIT_K,
    "max_chars": 1_000_000,
}
"""A replayed question is asked as an agent would: ten nodes come back, and the outcome
is about those ten."""


@dataclass(slots=True)
class TurnFile:
    """A conversation written as a workspace file: one section per turn, under its session."""

    text: str
    dia_at_line: dict[int, str]


def turn_file(sample: dict[str, Any]) -> TurnFile:
    """One ``## Session N (date)`` section per session, one ``### <dia_id>`` per turn in it.

    As a host would keep a chat log: the date once, on the session's heading (a
    turn's node finds it in its heading path), each turn ``Speaker: text``.
    """
    conversation = sample["conversation"]
    lines = [f"# Conversation {sample['sample_id']}", ""]
    dia_at_line: dict[int, str] = {}
    seen: set[str] = set()
    for key in session_keys(conversation):
        date = str(conversation.get(f"{key}_date_time") or "")
        number = key.split("_")[1]
        lines += [f"## Session {number} ({date})" if date else f"## Session {number}", ""]
        for turn in conversation[key]:
            dia = normalise_dia_id(str(turn.get("dia_id", "")))
            if not dia or dia in seen:
                continue
            seen.add(dia)
            dia_at_line[len(lines) + 1] = dia
            lines.append(f"### {dia}")
            speaker = str(turn.get("speaker") or "")
            text = " ".join(turn_text(turn).split())
            lines += [f"{speaker}: {text}" if speaker else text, ""]
    return TurnFile("\n".join(lines) + "\n", dia_at_line)


def _ranked_turns(result: dict[str, Any], dia_at_line: dict[int, str]) -> list[str]:
    """The fired chunk nodes of a query result as turn ids, best first."""
    ranked: list[str] = []
    for node in result.get("nodes", []):
        lines = node.get("lines")
        if node.get("kind") == "chunk" and lines:
            dia = dia_at_line.get(int(lines[0]))
            if dia is not None and dia not in ranked:
                ranked.append(dia)
    return ranked


def graph_questions(questions: Sequence[Question]) -> list[Question]:
    """The questions the graph modes score: the odd-numbered ones (1st, 3rd, ...) of
    each conversation, in the order ``run_graph_mode`` scores them."""
    by_sample: dict[str, list[Question]] = {}
    for q in questions:
        by_sample.setdefault(q.sample_id, []).append(q)
    return [q for asked in by_sample.values() for q in asked[0::2]]


def run_graph_mode(
    mode: str, samples: Sequence[dict[str, Any]], questions: Sequence[Question], tmp: Path
) -> dict[str, Any]:
    """Score ``query`` or ``query_learned`` on the odd-numbered questions of each sample.

    Each sample gets its own database: its turns are loaded by ``sync`` of a generated
    workspace file (one chunk node per turn, consecutive turns linked by ``sequence``
    edges). ``query_learned`` first replays the even-numbered questions (2nd, 4th, ...):
    each is a ``query`` followed by ``learn`` with +1 when an evidence turn is in its top
    10 and -1 otherwise; unless the mode is ``query_learned:outcomes``, a miss is also
    taught back as a node holding the question that links to the evidence turns (what a
    user saying "no, it was in these messages" gives). The odd-numbered questions (1st,
    3rd, ...) are then scored as in ``query``.
    """
    learned = mode.startswith("query_learned")
    links = mode in ("query_learned", "query_learned:corrections")
    teach_kind = "correction" if mode.endswith(":corrections") else "teaching"
    by_sample: dict[str, list[Question]] = {}
    for q in questions:
        by_sample.setdefault(q.sample_id, []).append(q)
    scored: list[Question] = []
    rows: list[dict[str, float]] = []
    replay = {"replayed": 0, "answered": 0, "taught": 0, "edges_updated": 0}
    started = time.perf_counter()
    for sample in samples:
        sample_id = str(sample["sample_id"])
        asked = by_sample.get(sample_id, [])
        if not asked:
            continue
        workspace = tmp / f"{mode.replace(':', '_')}-{sample_id}"
        (workspace / "memory").mkdir(parents=True)
        turns = turn_file(sample)
        (workspace / "memory" / "conversation.md").write_text(turns.text)
        db = workspace / "graph.db"
        with Client.spawn(db, args=["--auto-compact", "false"], cwd=ROOT) as client:
            client.call("sync", {"workspace": str(workspace)}, timeout=600)
            line_of = {dia: line for line, dia in turns.dia_at_line.items()}
            if learned:
                for q in asked[1::2]:
                    result = client.call(
                        "query", {"query": q.question, "chat_id": "replay", **REPLAY_QUERY}
                    )
                    top = _ranked_turns(result, turns.dia_at_line)[:HIT_K]
                    hit = bool(set(top) & set(q.evidence))
                    useful = [
                        n["id"]
                        for n in result.get("nodes", [])
                        if n.get("lines")
                        and turns.dia_at_line.get(int(n["lines"][0])) in q.evidence
                    ]
                    evidence: list[str] = []
                    if links and not hit:
                        found = (_turn_node(client, turns, line_of[e]) for e in q.evidence)
                        evidence = [node for node in found if node is not None]
                        useful = evidence  # the correction names the turns that were right
                    got = client.call(
                        "learn",
                        {"outcome": 1 if hit else -1, "chat_id": "replay", "useful": useful},
                    )
                    replay["replayed"] += 1
                    replay["answered"] += hit
                    replay["edges_updated"] += int(got["edges_updated"])
                    if links and not hit and evidence:
                        client.call(
                            "teach",
                            {
                                "content": q.question,
                                "kind": teach_kind,
                                "chat_id": "replay",
                                "links": evidence,
                            },
                        )
                        replay["taught"] += 1
            for q in asked[0::2]:
                result = client.call("query", {"query": q.question, "record": False, **GRAPH_QUERY})
                rows.append(score_question(_ranked_turns(result, turns.dia_at_line), q.evidence))
                scored.append(q)
    out = summarise(scored, rows)
    out["query_seconds"] = round(time.perf_counter() - started, 2)
    out["scored"] = "odd-numbered questions of each conversation (1st, 3rd, ...)"
    if learned:
        out["replay"] = replay
    return out


def _turn_node(client: Client, turns: TurnFile, line_no: int) -> str | None:
    """The chunk node of the turn headed at ``line_no``, found by querying its text."""
    text = turns.text.split("\n")[line_no]  # the turn's text follows its heading
    result = client.call(
        "query", {"query": text or "?", "top_k": 5, "record": False, "max_chars": 1_000_000}
    )
    for node in result["nodes"]:
        if node.get("lines") and int(node["lines"][0]) == line_no:
            return str(node["id"])
    return None


def table(mode: str, result: dict[str, Any]) -> str:
    """A human-readable table of one mode's figures."""
    if "error" in result:
        return f"{mode}: {result['error']}\n"
    cols: tuple[str, ...] = ("recall@5", "recall@10", "recall@25", "recall@50")
    cols += ("recall_all@10", "mrr", "session_recall@5")
    head = f"{'':<24}" + "".join(f"{c:>18}" for c in cols) + f"{'n':>6}"
    lines = [f"== {mode} ==", head]
    groups = [("all", result)]
    groups += [
        (f"{c} {CATEGORIES.get(c, '')}".strip(), v) for c, v in result["by_category"].items()
    ]
    for name, g in groups:
        lines.append(f"{name:<24}" + "".join(f"{g[c]:>18}" for c in cols) + f"{g['questions']:>6}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data", type=Path, help="a LoCoMo JSON file (list of samples)")
    parser.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    parser.add_argument("--modes", default="full_text", help="comma-separated grep modes")
    parser.add_argument("--db", type=Path, help="database to use (default: a temporary one)")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="also the ranking stage cross-validated by conversation (scripts/train_ranker.py): "
        "modes hybrid:cv, full_text:cv and their shuffled-label controls",
    )
    args = parser.parse_args(argv)

    samples = json.loads(args.data.read_text())
    if not isinstance(samples, list):
        parser.error("the data file must hold a JSON list of samples")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    data = questions_of(samples)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="eval_locomo_") as tmp:
        db = args.db or Path(tmp) / "locomo.db"
        log = (Path(tmp) / "daemon.log").open("wb")
        with Client.spawn(db, args=["--auto-compact", "false"], stderr=log, cwd=ROOT) as client:
            t0 = time.perf_counter()
            ingest = ingest_all(client, samples)
            ingest_seconds = time.perf_counter() - t0
            if any(m.startswith(("semantic", "hybrid")) for m in modes):
                embed_seconds = wait_for_embeddings(client)
                print(f"embedding drained {embed_seconds:.1f}s after ingest", file=sys.stderr)
            entity_seconds = wait_for_entities(client)
            print(f"entity index drained {entity_seconds:.1f}s later", file=sys.stderr)
            results = {
                mode: run_mode(client, mode, data.questions)
                for mode in modes
                if mode not in GRAPH_MODES
            }
            if any(m in GRAPH_MODES for m in modes):
                # The baseline the graph must beat, on exactly the questions it scores.
                if not any(m.startswith(("semantic", "hybrid")) for m in modes):
                    wait_for_embeddings(client)
                results[GRAPH_BASELINE] = run_mode(
                    client, "hybrid", graph_questions(data.questions)
                )
        log.close()
        if args.cv:
            import train_ranker

            report, _ = train_ranker.figures(db, data.questions)
            for ranked_mode, r in report.items():
                results[f"{ranked_mode}:cv"] = r["cross_validated"]
                results[f"{ranked_mode}:cv-shuffled-labels"] = r["shuffled_labels"]
        for mode in modes:
            if mode in GRAPH_MODES:
                results[mode] = run_graph_mode(mode, samples, data.questions, Path(tmp))
    elapsed = time.perf_counter() - started

    print(
        f"{args.data}: {len(samples)} conversations, {ingest['turns']} turns "
        f"({ingest['ingested']} new, {ingest['duplicates']} duplicates, "
        f"{ingest['unparsed_session_dates']} unparsed session dates), "
        f"{len(data.questions)} questions scored; skipped {data.skipped_evidence_ids} "
        f"evidence ids not in their conversation, {data.skipped_questions} questions "
        f"without evidence, {data.malformed_evidence_fields} malformed evidence fields; "
        f"ingest {ingest_seconds:.1f}s, {elapsed:.1f}s in all",
        file=sys.stderr,
    )
    for mode, result in results.items():
        print(table(mode, result), file=sys.stderr)
    if args.json:
        for result in results.values():
            if "error" not in result:
                result["skipped_evidence_ids"] = data.skipped_evidence_ids
                result["skipped_questions"] = data.skipped_questions
                result["malformed_evidence_fields"] = data.malformed_evidence_fields
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
