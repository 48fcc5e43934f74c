"""Train the graph's seed ranking on LoCoMo dev, cross-validated by conversation; write its weights.

Usage::

    python scripts/train_node_ranker.py ../shared/data/locomo/locomo_dev.json [--no-write] [--json]

Each conversation is synced into its own database as ``scripts/eval_locomo.py``'s
graph modes do (a workspace file, a heading per session and one per turn, so one
chunk node per turn). Then, in-process, every question's node pool and feature
matrix (``brain.recall.search.node_ranking``) are recorded as the engine's
``query`` builds them, labelled 1 where the node is one of its evidence turns. The
logistic regression is ``scripts/train_ranker.py``'s (L2 1.0, standardised
features, Newton's method): trained on four conversations and scored on the fifth,
in every rotation (the cross-validated figure), the same with the training labels
shuffled within each question (the control), and finally fitted on all of dev and
written to ``brain/recall/search/node_ranker.json`` with the data's provenance
(unless ``--no-write``). Figures are given for all questions and for the ones the
graph modes of the eval score (the odd-numbered of each conversation).

Only the dev split is used; nothing is searched over.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_locomo as ev
import train_ranker as tr

from brain import Brain, TraverseOptions
from brain.recall.search import node_ranking


def collect(
    samples: Sequence[dict[str, Any]], questions: Sequence[ev.Question], tmp: Path
) -> list[tr.Pool]:
    """Every question's node pool, from a database per conversation synced from its turn file.

    ``query`` runs as in the daemon, with the feature matrix recorded as it is built
    and a neutral model (the shipped one may not fit features being added).
    """
    seen: list[tuple[list[int], NDArray[np.float64]]] = []
    build = node_ranking.features

    def record(pool: Any) -> NDArray[np.float64]:
        x = build(pool)
        seen.append((list(pool.nodes), x))
        return x

    width = len(node_ranking.FEATURES)
    neutral = node_ranking.Model(np.zeros(width), np.ones(width), np.zeros(width), 0.0)
    shipped = node_ranking.load_model
    node_ranking.features = record  # type: ignore[assignment]
    node_ranking.load_model = lambda: neutral  # type: ignore[assignment]
    pools: list[tr.Pool] = []
    try:
        for sample in samples:
            sample_id = str(sample["sample_id"])
            workspace = tmp / sample_id
            (workspace / "memory").mkdir(parents=True)
            turns = ev.turn_file(sample)
            (workspace / "memory" / "conversation.md").write_text(turns.text)
            engine = Brain(workspace / "graph.db")
            engine.sync(workspace)
            line_of = {
                int(r[0]): int(r[1])
                for r in engine.store.execute(
                    "SELECT id, line_start FROM nodes WHERE kind = 'chunk'"
                )
            }
            for q in (q for q in questions if q.sample_id == sample_id):
                seen.clear()
                engine.query(q.question, options=TraverseOptions(top_k=ev.LIMIT), record=False)
                nodes, x = seen[-1] if seen else ([], np.zeros((0, width)))
                ids = [turns.dia_at_line.get(line_of.get(n, -1), "") for n in nodes]
                evidence = set(q.evidence)
                y = np.array([1.0 if i in evidence else 0.0 for i in ids])
                pools.append(tr.Pool(q, ids, x, y))
            engine.close()
    finally:
        node_ranking.features = build  # type: ignore[assignment]
        node_ranking.load_model = shipped  # type: ignore[assignment]
    return pools


def figures(pools: Sequence[tr.Pool]) -> dict[str, Any]:
    """Fused order, cross-validated, shuffled-label control and the full-data model on dev,
    for all questions and for the graph modes' questions."""
    graph = {id(q) for q in ev.graph_questions([p.question for p in pools])}
    model = tr.fit(pools)
    rows = {
        "fused": tr.evaluate(pools, None),
        "cross_validated": tr.cross_validate(pools),
        "shuffled_labels": tr.cross_validate(pools, shuffled=True),
        "shipped_on_dev": tr.evaluate(pools, model),
    }
    questions = [p.question for p in pools]
    out: dict[str, Any] = {}
    for name, r in rows.items():
        out[name] = ev.summarise(questions, r)
        picked = [(q, row) for q, row in zip(questions, r, strict=True) if id(q) in graph]
        out[f"{name}@graph_questions"] = ev.summarise(
            [q for q, _ in picked], [row for _, row in picked]
        )
    out["candidates_per_question"] = round(float(np.mean([len(p.ids) for p in pools])), 1)
    out["model"] = model
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("data", type=Path, help="the LoCoMo dev JSON file")
    parser.add_argument("--no-write", action="store_true", help="do not write the weights")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    samples: list[dict[str, Any]] = json.loads(args.data.read_text())
    questions = ev.questions_of(samples).questions
    with tempfile.TemporaryDirectory(prefix="train_node_ranker_") as tmp:
        pools = collect(samples, questions, Path(tmp))
    report = figures(pools)
    model = report.pop("model")
    for name, r in report.items():
        if isinstance(r, dict):
            print(ev.table(name, r), file=sys.stderr)
    if not args.no_write:
        out = {
            "version": node_ranking.NODE_RANKER_VERSION,
            "features": [name for name, _ in node_ranking.FEATURES],
            "model": model,
            "provenance": {
                "trained_by": "scripts/train_node_ranker.py",
                "data": args.data.name,
                "data_sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
                "conversations": [str(s["sample_id"]) for s in samples],
                "questions": len(questions),
                "workspace_file": "scripts/eval_locomo.py turn_file (a heading per session, "
                "one per turn)",
                "l2": tr.L2,
                "pool_per_ranking": node_ranking.POOL,
                "cross_validated_r10": report["cross_validated"]["recall@10"],
                "cross_validated_r10_graph_questions": report["cross_validated@graph_questions"][
                    "recall@10"
                ],
                "shuffled_labels_r10": report["shuffled_labels"]["recall@10"],
            },
        }
        node_ranking.WEIGHTS_PATH.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {node_ranking.WEIGHTS_PATH}", file=sys.stderr)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
