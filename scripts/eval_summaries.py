"""Summary fact recall on LoCoMo: how much of each answer the summaries of its evidence keep.

Usage::

    python scripts/eval_summaries.py DATA.json --json [--summarizers a,b] [--budget N]
        [--conversations 0,1] [--misses FILE]

For each summarizer (default: all of ``default``, ``extractive_v1``,
``truncation``, ``random``; see ``brain.lcm.offline``) a daemon is started on a
fresh database with ``--auto-compact false --offline-summarizer NAME``. Every
conversation is ingested through it as in scripts/eval_locomo.py (one session
per sample, a message per turn with its ``name`` and session date), assembled
once with ``--budget`` tokens (default 16000) so that compaction sizes itself
as for a host with that budget (leaf chunks of a quarter of it halved, leaf
summaries aimed at a quarter of a chunk: see ``brain.lcm.budgets``; ``0``: no
assemble, the daemon's own sizes, 20k-token chunks and 1,200-token leaves,
which leave no condensed summary on LoCoMo), then compacted fully
(``compact``, no target). Every summary made is described.

A question is scored at leaf depth when each of its evidence turns is covered
by a leaf summary: the share of its answer's content words (lowercased,
stemmed, stop words dropped: ``answer_terms``) found among the words of those
leaf summaries. ``leaf_fact_recall`` is the mean share, ``leaf_full_answer``
the share of questions whose every answer word was found. Condensed figures
are the same against the shallowest condensed summaries whose subtrees cover
the evidence. Category 5 (adversarial, no ``answer``) and answers with no
content word ("Yes") are not scored. ``compression_leaf`` is leaf summary
tokens over the tokens of the messages they cover; ``compression_condensed``
the same for condensed summaries (over all the messages beneath them).

With ``--json`` one JSON object goes to stdout, one key per summarizer, each
``{"leaf_fact_recall", "leaf_full_answer", "condensed_fact_recall",
"condensed_full_answer", "compression_leaf", "compression_condensed",
"by_category": {category: {...}}, "questions": {...}, "summaries": {...},
"summarize_ms"}`` (recalls in percent); a table goes to stderr.

``--conversations 0,1`` scores only those samples (by index in the file: a quick
look while iterating). ``--misses FILE`` writes one JSON line per leaf-scored
question some of whose answer words are in its evidence turns but not in the leaf
summaries covering them (what the summarizer dropped, not what the data never
said): the summarizer, question, answer, the words missed, the evidence turns and
the covering leaves' text.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_locomo import CATEGORIES, ingest_all, messages_of, normalise_dia_id, session_keys

from protocol.client import Client

ROOT: Final = Path(__file__).resolve().parent.parent
SUMMARIZERS: Final = ("default", "extractive_v1", "truncation", "random")
BUDGET: Final = 16_000
_EVIDENCE: Final = re.compile(r"D(\d+):(\d+)")
_WORD: Final = re.compile(r"[a-z0-9]+")
# Function words only: every content word of an answer counts, reactions included
# ("may" is not one: "7 May 2023").
STOP_WORDS: Final = frozenset(
    (  # noqa: SIM905 (a word list reads better as text)
        "a an the and or but of in on at to for from by with about as into than then "
        "is are was were be been being am do does did has have had it its this that these "
        "those there here he she they them his her their hers we us our you your i me my "
        "s t not no yes so if which who whom what when where why how also just very some any "
        "would could should will can might must"
    ).split()
)


# -- scoring --------------------------------------------------------------------------------


def stem(word: str) -> str:
    """A light, deterministic suffix stemmer (lowercase input): plurals, -ing, -ed, -ly."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ied", "y"), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + keep
            if keep == "" and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # "running" -> "run"
            return word
    if word.endswith("ly") and len(word) > 5:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def normalised_words(text: str) -> set[str]:
    """The stemmed, lowercased words of ``text`` without stop words."""
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS}


def answer_terms(answer: str) -> set[str]:
    """The content words of an answer, as ``normalised_words`` gives them."""
    return normalised_words(answer)


def answer_share(answer: str, text: str) -> float | None:
    """The share of ``answer``'s content words found in ``text`` (None: it has none)."""
    wanted = answer_terms(answer)
    if not wanted:
        return None
    return len(wanted & normalised_words(text)) / len(wanted)


@dataclass(frozen=True, slots=True)
class AnsweredQuestion:
    """A question with a gold answer and the evidence turns present in its conversation."""

    sample_id: str
    question: str
    answer: str
    category: str
    evidence: tuple[str, ...]


def answered_questions(samples: Sequence[dict[str, Any]]) -> list[AnsweredQuestion]:
    """Every question with an ``answer`` and at least one evidence turn that exists."""
    out: list[AnsweredQuestion] = []
    for sample in samples:
        conversation = sample["conversation"]
        known = {
            normalise_dia_id(str(t.get("dia_id", "")))
            for k in session_keys(conversation)
            for t in conversation[k]
        }
        for qa in sample.get("qa", []):
            if qa.get("answer") is None:
                continue  # adversarial questions carry no answer
            ids = [
                f"D{int(s)}:{int(t)}"
                for raw in qa.get("evidence") or []
                for s, t in _EVIDENCE.findall(str(raw))
            ]
            present = tuple(i for i in dict.fromkeys(ids) if i in known)
            if present:
                out.append(
                    AnsweredQuestion(
                        str(sample["sample_id"]),
                        str(qa.get("question") or ""),
                        str(qa["answer"]),
                        str(qa.get("category", "?")),
                        present,
                    )
                )
    return out


@dataclass(slots=True)
class SummaryView:
    """One summary as the eval sees it: depth, text, size, and the turns beneath it."""

    id: str
    depth: int
    content: str
    tokens: int
    source_tokens: int
    messages: frozenset[str]


def score_level(
    questions: Iterable[AnsweredQuestion], summaries: dict[str, list[SummaryView]]
) -> tuple[list[tuple[AnsweredQuestion, float]], int]:
    """Score questions against ``summaries`` (per sample id; for each evidence turn the
    smallest summary covering it). Returns (question, share) rows and how many questions
    were not fully covered."""
    rows: list[tuple[AnsweredQuestion, float]] = []
    uncovered = 0
    for q in questions:
        views = sorted(summaries.get(q.sample_id, []), key=lambda v: (v.depth, v.id))
        covering: list[SummaryView] = []
        for turn in q.evidence:
            hit = next((v for v in views if turn in v.messages), None)
            if hit is None:
                break
            if hit not in covering:
                covering.append(hit)
        else:
            share = answer_share(q.answer, "\n".join(v.content for v in covering))
            if share is not None:
                rows.append((q, share))
            continue
        uncovered += 1
    return rows, uncovered


def figures(rows: Sequence[tuple[AnsweredQuestion, float]]) -> dict[str, Any]:
    """Mean share and full-answer share (percent), overall and per category."""

    def agg(shares: Sequence[float]) -> dict[str, Any]:
        n = len(shares)
        return {
            "fact_recall": round(100 * sum(shares) / n, 1) if n else 0.0,
            "full_answer": round(100 * sum(s >= 1.0 for s in shares) / n, 1) if n else 0.0,
            "questions": n,
        }

    by_cat: dict[str, list[float]] = defaultdict(list)
    for q, share in rows:
        by_cat[q.category].append(share)
    out = agg([s for _, s in rows])
    out["by_category"] = {
        f"{c} {CATEGORIES.get(c, '')}".strip(): agg(by_cat[c]) for c in sorted(by_cat)
    }
    return out


def missed(
    questions: Iterable[AnsweredQuestion],
    summaries: dict[str, list[SummaryView]],
    turns: dict[str, dict[str, str]],
) -> list[dict[str, Any]]:
    """The questions whose evidence turns (``turns``: sample id -> turn id -> text) hold
    answer words that the leaf summaries covering them lost."""
    out: list[dict[str, Any]] = []
    for q in questions:
        views = sorted(summaries.get(q.sample_id, []), key=lambda v: (v.depth, v.id))
        covering = [next((v for v in views if t in v.messages), None) for t in q.evidence]
        if any(v is None for v in covering):
            continue
        evidence = [turns.get(q.sample_id, {}).get(t, "") for t in q.evidence]
        kept = normalised_words("\n".join(v.content for v in covering if v is not None))
        lost = sorted((answer_terms(q.answer) & normalised_words("\n".join(evidence))) - kept)
        if lost:
            out.append(
                {
                    "sample": q.sample_id,
                    "category": q.category,
                    "question": q.question,
                    "answer": q.answer,
                    "lost": lost,
                    "evidence": evidence,
                    "leaves": list(dict.fromkeys(v.content for v in covering if v is not None)),
                }
            )
    return out


def compression(views: Iterable[SummaryView]) -> float:
    """Summary tokens over the source tokens beneath them (0 when there is none)."""
    views = list(views)
    source = sum(v.source_tokens for v in views)
    return round(sum(v.tokens for v in views) / source, 4) if source else 0.0


# -- running --------------------------------------------------------------------------------


def summaries_of(client: Client, session: str, ids: Sequence[str]) -> list[SummaryView]:
    """Describe every summary made for ``session``: its depth, text and turns beneath it."""
    described = {
        i: client.call("describe", {"id": i, "session": session}, timeout=300) for i in ids
    }
    leaves: dict[str, frozenset[str]] = {}

    def turns(summary_id: str) -> frozenset[str]:
        if summary_id in leaves:
            return leaves[summary_id]
        info = described.get(summary_id) or client.call(
            "describe", {"id": summary_id, "session": session}
        )
        found = set(info.get("sources", {}).get("messages") or [])
        for child in info.get("children", []):
            found |= turns(str(child["id"]))
        leaves[summary_id] = frozenset(found)
        return leaves[summary_id]

    return [
        SummaryView(
            id=i,
            depth=int(info["depth"]),
            content=str(info["content"]),
            tokens=int(info["token_count"]),
            source_tokens=int(info["subtree"]["source_tokens"]),
            messages=turns(i),
        )
        for i, info in described.items()
    ]


def run_summarizer(
    name: str,
    samples: Sequence[dict[str, Any]],
    questions: Sequence[AnsweredQuestion],
    budget: int,
    tmp: Path,
    misses: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Ingest, compact and score every sample with the offline summarizer ``name``
    (``misses``: extended with what its leaves lost, see ``missed``)."""
    db = tmp / f"{name}.db"
    views: dict[str, list[SummaryView]] = {}
    summarize_ms = 0.0
    with (
        (tmp / f"{name}.log").open("wb") as log,
        Client.spawn(
            db, args=["--auto-compact", "false", "--offline-summarizer", name], stderr=log, cwd=ROOT
        ) as client,
    ):
        ingest_all(client, samples)
        for sample in samples:
            session = str(sample["sample_id"])
            if budget:
                client.call("assemble", {"session": session, "budget": budget}, timeout=300)
            report = client.call("compact", {"session": session}, timeout=1800)
            summarize_ms += float(report.get("summarize_ms", 0.0))
            views[session] = summaries_of(client, session, report.get("summaries", []))
    leaf = {s: [v for v in vs if v.depth == 0] for s, vs in views.items()}
    condensed = {s: [v for v in vs if v.depth >= 1] for s, vs in views.items()}
    leaf_rows, leaf_uncovered = score_level(questions, leaf)
    if misses is not None:
        turns = {
            str(s["sample_id"]): {str(m["id"]): str(m["content"]) for m in messages_of(s)[0]}
            for s in samples
        }
        misses.extend({"summarizer": name, **m} for m in missed(questions, leaf, turns))
    cond_rows, cond_uncovered = score_level(questions, condensed)
    leaf_fig, cond_fig = figures(leaf_rows), figures(cond_rows)
    all_leaves = [v for vs in leaf.values() for v in vs]
    all_condensed = [v for vs in condensed.values() for v in vs]
    return {
        "leaf_fact_recall": leaf_fig["fact_recall"],
        "leaf_full_answer": leaf_fig["full_answer"],
        "condensed_fact_recall": cond_fig["fact_recall"],
        "condensed_full_answer": cond_fig["full_answer"],
        "compression_leaf": compression(all_leaves),
        "compression_condensed": compression(all_condensed),
        "by_category": leaf_fig["by_category"],
        "condensed_by_category": cond_fig["by_category"],
        "questions": {
            "leaf_scored": leaf_fig["questions"],
            "leaf_uncovered": leaf_uncovered,
            "condensed_scored": cond_fig["questions"],
            "condensed_uncovered": cond_uncovered,
        },
        "summaries": {
            "leaf": len(all_leaves),
            "condensed": len(all_condensed),
            "max_depth": max((v.depth for v in all_condensed), default=0),
        },
        "summarize_ms": round(summarize_ms, 1),
    }


def table(results: dict[str, dict[str, Any]]) -> str:
    """The headline figures, one row per summarizer."""
    cols = (
        "leaf_fact_recall",
        "leaf_full_answer",
        "condensed_fact_recall",
        "compression_leaf",
        "compression_condensed",
    )
    lines = [f"{'summarizer':<16}" + "".join(f"{c:>24}" for c in cols)]
    for name, r in results.items():
        lines.append(f"{name:<16}" + "".join(f"{r[c]:>24}" for c in cols))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data", type=Path, help="a LoCoMo JSON file (list of samples)")
    parser.add_argument("--json", action="store_true", help="print one JSON object to stdout")
    parser.add_argument(
        "--summarizers", default=",".join(SUMMARIZERS), help="comma-separated offline summarizers"
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=BUDGET,
        help="the assemble budget compaction sizes for (0: the daemon's own sizes)",
    )
    parser.add_argument(
        "--conversations", default="", help="comma-separated sample indices to run (default: all)"
    )
    parser.add_argument(
        "--misses", type=Path, help="write the answer words leaves lost, one JSON line a question"
    )
    args = parser.parse_args(argv)
    samples = json.loads(args.data.read_text())
    if not isinstance(samples, list):
        parser.error("the data file must hold a JSON list of samples")
    if args.conversations:
        try:
            wanted = [int(i) for i in args.conversations.split(",") if i.strip()]
            samples = [samples[i] for i in wanted]
        except (ValueError, IndexError):
            parser.error(f"--conversations: indices 0 to {len(samples) - 1}, comma-separated")
    names = [n.strip() for n in args.summarizers.split(",") if n.strip()]
    unknown = [n for n in names if n not in SUMMARIZERS]
    if unknown:
        parser.error(f"unknown summarizers: {', '.join(unknown)} (known: {', '.join(SUMMARIZERS)})")
    questions = answered_questions(samples)
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    misses: list[dict[str, Any]] | None = [] if args.misses else None
    with tempfile.TemporaryDirectory(prefix="eval_summaries_") as tmp:
        for name in names:
            results[name] = run_summarizer(name, samples, questions, args.budget, Path(tmp), misses)
    if args.misses and misses is not None:
        args.misses.write_text("".join(json.dumps(m) + "\n" for m in misses))
    print(
        f"{args.data}: {len(samples)} conversations, {len(questions)} questions with answers, "
        f"budget {args.budget}, {time.perf_counter() - started:.1f}s",
        file=sys.stderr,
    )
    print(table(results), file=sys.stderr)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
