"""Train the graph's seed ranking on LoCoMo dev, cross-validated by conversation; write its weights.

Usage::

    python scripts/train_node_ranker.py ../shared/data/locomo/locomo_dev.json [--no-write] [--json]

Each conversation is synced into its own database as ``scripts/eval_locomo.py``'s
graph modes do (a workspace file, a heading per session and one per turn, so one
chunk node per turn). Then, in-process, every question's node pool and feature
matrix (``brain.recall.search.node_ranking``) are recorded as the engine's
``query`` builds them, labelled 1 where the node is one of its evidence turns. The
logistic regression (L2 1.0 as ``scripts/train_ranker.py``'s, standardised
features, Newton's method): trained on four conversations and scored on the fifth,
in every rotation (the cross-validated figure), the same with the training labels
shuffled within each question (the control), and finally fitted on all of dev and
written to ``brain/recall/search/node_ranker.json`` with the data's provenance
(unless ``--no-write``). Figures are given for all questions and for the ones the
graph modes of the eval score (the odd-numbered of each conversation).

The fit is pointwise (``fit``), not grep's listwise one (``train_ranker.fit``): a
seed's score is read as a probability (``node_ranking._seed_scores``), so the model's
output must be calibrated log-odds. Scores from the listwise fit are relative only:
a small graph's candidates all came out near certain and fired together (a synced
file's one matching chunk was no longer the first answer).

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

from brain import Brain, NewNode, TraverseOptions, node_ranking


class _Recorder:
    """Records the feature matrices ``query`` builds, scoring with the model given."""

    def __init__(self) -> None:
        self.build = node_ranking.features
        self.shipped = node_ranking.load_model
        self.seen: list[tuple[list[int], NDArray[np.float64]]] = []
        width = len(node_ranking.FEATURES)
        self.model = node_ranking.Model(np.zeros(width), np.ones(width), np.zeros(width), 0.0)

    def __enter__(self) -> _Recorder:
        def record(pool: Any) -> NDArray[np.float64]:
            x = self.build(pool)
            self.seen.append((list(pool.nodes), x))
            return x

        node_ranking.features = record  # type: ignore[assignment]
        node_ranking.load_model = lambda: self.model  # type: ignore[assignment]
        return self

    def __exit__(self, *_: object) -> None:
        node_ranking.features = self.build  # type: ignore[assignment]
        node_ranking.load_model = self.shipped  # type: ignore[assignment]


def fit(pools: Sequence[tr.Pool]) -> dict[str, Any]:
    """A pointwise logistic regression on the pools' rows: mean, scale, weights, bias.

    Calibrated (the bias is fitted and not shrunk), since seed scores read it as a
    probability; see the module's docstring.
    """
    x = np.vstack([p.x for p in pools if len(p.ids)])
    y = np.concatenate([p.y for p in pools if len(p.ids)])
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.column_stack([(x - mean) / scale, np.ones(len(x))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], tr.L2)
    penalty[-1] = 0.0  # the bias is not shrunk
    for _ in range(25):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return {
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "weights": w[:-1].tolist(),
        "bias": float(w[-1]),
    }


def _open(sample: dict[str, Any], where: Path) -> tuple[Brain, ev.TurnFile, dict[int, int]]:
    """A database synced from the sample's turn file; row id -> heading line of its chunks."""
    (where / "memory").mkdir(parents=True)
    turns = ev.turn_file(sample)
    (where / "memory" / "conversation.md").write_text(turns.text)
    engine = Brain(where / "graph.db")
    engine.sync(where)
    line_of = {
        int(r[0]): int(r[1])
        for r in engine.store.execute("SELECT id, line_start FROM nodes WHERE kind = 'chunk'")
    }
    return engine, turns, line_of


def _pool(
    rec: _Recorder, engine: Brain, turns: ev.TurnFile, line_of: dict[int, int], q: ev.Question
) -> tr.Pool:
    rec.seen.clear()
    engine.query(q.question, options=TraverseOptions(top_k=ev.LIMIT), record=False)
    width = len(node_ranking.FEATURES)
    nodes, x = rec.seen[-1] if rec.seen else ([], np.zeros((0, width)))
    ids = [turns.dia_at_line.get(line_of.get(n, -1), "") for n in nodes]
    evidence = set(q.evidence)
    return tr.Pool(q, ids, x, np.array([1.0 if i in evidence else 0.0 for i in ids]))


def _replay(
    engine: Brain, turns: ev.TurnFile, line_of: dict[int, int], asked: Sequence[ev.Question]
) -> None:
    """``query_learned``'s replay (scripts/eval_locomo.py), in-process."""
    node_at = {
        line: engine.store.scalar("SELECT node_id FROM nodes WHERE id = ?", (n,))
        for n, line in line_of.items()
    }
    line_of_dia = {dia: line for line, dia in turns.dia_at_line.items()}
    for q in asked:
        result = engine.query(
            q.question, chat_id="replay", options=TraverseOptions(**ev.REPLAY_QUERY)
        )
        shown = [
            (f.id, turns.dia_at_line.get(f.lines[0]) if f.lines else None) for f in result.fired
        ]
        top = [dia for _, dia in shown if dia is not None][: ev.HIT_K]
        hit = bool(set(top) & set(q.evidence))
        useful = [node for node, dia in shown if dia in q.evidence]
        evidence: list[str] = []
        if not hit:
            evidence = [
                str(node_at[line_of_dia[e]]) for e in q.evidence if line_of_dia.get(e) in node_at
            ]
            useful = evidence
        engine.learn(1 if hit else -1, chat_id="replay", useful=useful)
        if not hit and evidence:
            engine.teach(NewNode("teaching", q.question), chat_id="replay", links=evidence)


def collect(
    samples: Sequence[dict[str, Any]], questions: Sequence[ev.Question], tmp: Path
) -> tuple[list[tr.Pool], list[tr.Pool]]:
    """Every question's node pool in a graph that learned nothing, and in one that replayed
    the conversation's other half of the questions first (``query_learned``'s replay: the
    odd-numbered questions after the even-numbered, and the other way round).

    ``query`` runs as in the daemon, with the feature matrix recorded and a neutral model;
    the replays query with the model fitted on the first pools (nothing learned weighs).
    """
    fresh: list[tr.Pool] = []
    with _Recorder() as rec:
        for sample in samples:
            sample_id = str(sample["sample_id"])
            engine, turns, line_of = _open(sample, tmp / sample_id)
            for q in (q for q in questions if q.sample_id == sample_id):
                fresh.append(_pool(rec, engine, turns, line_of, q))
            engine.close()
    base = _model(fit(fresh))
    learned: list[tr.Pool] = []
    with _Recorder() as rec:
        for sample in samples:
            sample_id = str(sample["sample_id"])
            asked = [q for q in questions if q.sample_id == sample_id]
            for first, (replayed, scored) in enumerate(
                ((asked[1::2], asked[0::2]), (asked[0::2], asked[1::2]))
            ):
                engine, turns, line_of = _open(sample, tmp / f"{sample_id}-learned-{first}")
                neutral, rec.model = rec.model, base
                _replay(engine, turns, line_of, replayed)
                rec.model = neutral
                learned += [_pool(rec, engine, turns, line_of, q) for q in scored]
                engine.close()
    return fresh, learned


def _model(m: dict[str, Any]) -> node_ranking.Model:
    return node_ranking.Model(
        np.array(m["mean"]), np.array(m["scale"]), np.array(m["weights"]), float(m["bias"])
    )


def cross_validate(
    fresh: Sequence[tr.Pool], learned: Sequence[tr.Pool], *, shuffled: bool = False
) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Leave one conversation out, over both kinds of pool: each held-out conversation's
    fresh and learned pools scored by a model of the other conversations' pools."""
    rng = np.random.default_rng(15)
    rows: dict[int, dict[str, float]] = {}
    pools = list(fresh) + list(learned)
    for held in sorted({p.question.sample_id for p in pools}):
        train = [p for p in pools if p.question.sample_id != held]
        if shuffled:
            train = [tr.Pool(p.question, p.ids, p.x, rng.permutation(p.y)) for p in train]
        model = fit(train)
        test = [i for i, p in enumerate(pools) if p.question.sample_id == held]
        for i, row in zip(test, tr.evaluate([pools[i] for i in test], model), strict=True):
            rows[i] = row
    ordered = [rows[i] for i in range(len(pools))]
    return ordered[: len(fresh)], ordered[len(fresh) :]


def figures(fresh: Sequence[tr.Pool], learned: Sequence[tr.Pool]) -> dict[str, Any]:
    """Fused order, cross-validated, shuffled-label control and the full-data model on dev,
    in a fresh graph (``query``) and after a replay (``query_learned``), for the questions
    the eval's graph modes score (the odd-numbered of each conversation)."""
    graph = {id(q) for q in ev.graph_questions([p.question for p in fresh])}
    model = fit(list(fresh) + list(learned))
    cv = cross_validate(fresh, learned)
    control = cross_validate(fresh, learned, shuffled=True)
    rows = {
        "fused": (tr.evaluate(fresh, None), tr.evaluate(learned, None)),
        "cross_validated": cv,
        "shuffled_labels": control,
        "shipped_on_dev": (tr.evaluate(fresh, model), tr.evaluate(learned, model)),
    }
    out: dict[str, Any] = {}
    for name, (f_rows, l_rows) in rows.items():
        for state, pools, r in (("query", fresh, f_rows), ("query_learned", learned, l_rows)):
            picked = [
                (p.question, row)
                for p, row in zip(pools, r, strict=True)
                if id(p.question) in graph
            ]
            out[f"{name} {state}"] = ev.summarise(
                [q for q, _ in picked], [row for _, row in picked]
            )
    out["candidates_per_question"] = round(float(np.mean([len(p.ids) for p in fresh])), 1)
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
        fresh, learned = collect(samples, questions, Path(tmp))
    report = figures(fresh, learned)
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
                "replay": "query_learned's (scripts/eval_locomo.py): each half of a "
                "conversation's questions replayed before the other half is collected",
                "cross_validated_r10_graph_questions": {
                    state: report[f"cross_validated {state}"]["recall@10"]
                    for state in ("query", "query_learned")
                },
                "shuffled_labels_r10": report["shuffled_labels query"]["recall@10"],
            },
        }
        node_ranking.WEIGHTS_PATH.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {node_ranking.WEIGHTS_PATH}", file=sys.stderr)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
