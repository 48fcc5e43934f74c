#!/usr/bin/env python3
"""Throughput and latency benchmarks of the brain engine and daemon (DESIGN §7).

Usage::

    python scripts/bench.py --json [--only NAME[,NAME]] [--runs N] [--size F]

With ``--json`` exactly one JSON object goes to stdout; progress and the
human-readable table always go to stderr (without ``--json`` the table goes to
stdout instead). Each benchmark runs ``--runs`` times (default 5) and reports
the median of every metric at the top of its entry plus all run values under
``runs``; units are in the key names (``msgs_per_s``, ``p50_ms``, ...).
``--size`` scales every workload (``--size 0.1`` is a quick smoke run).

``assemble`` and ``sweep`` (the lossless context layer) report nested
figures, e.g. ``{"assemble": {"raw_5000": {"p50_ms": ...}}}``; their keys name
the nominal size and each group's ``messages`` the count actually built. The
default run builds their 1,000- and 5,000-message conversations; the
100,000-message variants (``raw_100000``, ``summarized_100000``,
``messages_100000`` and the 100k/5k per-message ratio) are built only when the
benchmark is named in ``--only``: each run then takes about a minute for
``assemble`` and half a minute for ``sweep`` (``--runs 1`` keeps it short;
``--size 0.05 --runs 1`` is a smoke run of a few seconds).

``grep`` times ``Brain.grep`` per mode (full_text and regex scoped to one
conversation, full_text, semantic and hybrid scoped and unscoped) on a database
of ``--grep-messages`` messages (default 10,000; e.g. ``10000,100000,1000000``:
1M takes about 6 minutes per run), every message embedded first. ``vectors``
times top-10 over StaticEmbedder vectors exact vs IVF (``brain.vectors.ann``) at
``--vector-rows`` (default 100,000 and 1,000,000), with IVF build time and
recall@10 against exact.

``graph`` times the learned retrieval graph through ``Brain`` at ``--graph-nodes``
(default 1,000 and 5,000; 50,000 takes about 1.5 minutes per run): the build (a
generated workspace of daily notes synced as chunk nodes, plus a tenth of the nodes
taught one by one), ``query`` p50/p95 with default and wide options split into
embedding, traversal and the rest, ``teach``, ``learn`` and correction p50,
``maintain`` (dry and full), ``save`` and the database bytes.

``maintain_reads`` builds a graph with SQL (10,000 nodes, or 100,000 when named
in ``--only``; 10 edges each, of random weight and age) and a 200-message
session, then times ``info`` and ``assemble`` through one daemon, idle and
while a ``maintain`` of every task runs on the same daemon (p50/p95/max, and
how long maintain took). Run it against older code with ``PYTHONPATH`` set to
that checkout, from a directory outside both (``python -m daemon`` puts the
working directory first on ``sys.path``).

``graph_scale`` builds maintain_reads' graph with node texts, every node embedded
(10,000 nodes, or 100,000 when named in ``--only``: a ~30 s build, once per
invocation), then through one daemon times the first answer after spawn, the first
query right after it, query and teach p50/p95 and a full ``maintain``.

``stop`` and ``unread`` run only when named in ``--only``: ``stop`` times
SIGTERM and ``shutdown`` to exit while a write is stuck on another process's
write lock (the daemon's ``shutdown_timeout_s`` is 2 s); ``unread`` is the
peak RSS of a daemon whose client sends 3,000 and 30,000 ``assemble``
requests (~90 kB answers) and reads nothing until the memory stops growing.

``peers`` runs only when named in ``--only``, once: brain and openclawbrain
12.2.6 (installed from PyPI into a virtualenv cached under ``~/.cache/brain-bench``)
on the same generated graph at ``--peer-nodes`` (default 1,000 and 5,000; about
1.5 minutes on 2 shared cores, mostly the peer), both through their stdio daemons,
each request sent to one then the other. Figures are ``{"ours", "peer",
"speedup"}`` (peer / ours) under ``peers.openclawbrain.nodes_N``; when the peer
cannot be installed the entry has ``skipped`` with the reason and the run succeeds.

``graph_daemon`` runs only when named in ``--only``, once: the peers benchmark's
graph in brain alone at ``--graph-daemon-nodes`` (default 1,000, 5,000 and
100,000; the 100k build takes about 2 minutes), one daemon per size: query round
trip p50/p95 (3 rounds of 40 queries, traces recorded), the daemon's own
``traverse_ms``, learn and teach p50, startup and the first query.

``host`` runs only when named in ``--only``, once (about a minute at ``--size 1``;
``--size 0.05`` is a few seconds): issue 26's fast host through the daemon on its offline
defaults. The unpaused tool loop in OpenAI and Anthropic shape (120 turns at 6,000), a
200-turn Anthropic coding session with parallel tool calls (8,000, ``stubs``; and the same
in OpenAI shape), the first assemble after a 600-message import (4,000 and 6,000), and,
from ``--locomo``, the longest conversation replayed 20 turns a batch at 4,000 (then
settled) and every conversation's evidence in the final context. ``--size`` scales the
turns, the import and the share of each LoCoMo conversation replayed. docs/architecture.md
(Benchmarks) says what each figure means.

The benchmarks live in ``scripts/benches/``, one module per area (``registry`` lists
them in order, ``targets`` holds the figures aimed for, ``cli`` is the command line);
this file is the entry point.

Everything happens in a temporary directory with fresh databases; daemons are
started with ``python -m daemon`` from this interpreter and are always reaped,
even when a benchmark fails. A failing benchmark is reported as
``{"error": ...}`` in its entry and makes the exit status 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

# ``python scripts/bench.py`` puts scripts/ first on sys.path; a loader that runs this file
# by path (tests/scripts) does not, and the benches package sits beside this file.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from benches.cli import main  # noqa: E402

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
