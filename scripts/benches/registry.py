"""Every benchmark by name, in the order a default run takes them."""

from __future__ import annotations

from typing import Final

from benches.assemble import assemble_params, bench_assemble, bench_sweep, sweep_params
from benches.core import Bench
from benches.graph import bench_graph, graph_params
from benches.graph_daemon import bench_graph_daemon, graph_daemon_params
from benches.grep import bench_grep, bench_reused_call_ids, grep_params, reused_ids_params
from benches.host import bench_host, host_params
from benches.ingest import (
    bench_group_commit,
    bench_ingest_batched,
    bench_ingest_batched_engine,
    bench_ingest_single,
    group_params,
    ingest_params,
    single_params,
)
from benches.lifecycle import (
    STOP_TIMEOUT_S,
    bench_provider_stall,
    bench_stop,
    bench_unread,
    provider_stall_params,
    stop_params,
    unread_params,
)
from benches.maintain import (
    bench_graph_scale,
    bench_maintain_reads,
    bench_read_under_write,
    maintain_params,
    ruw_params,
    scale_params,
)
from benches.million import bench_million, million_params
from benches.peers import PEER_PACKAGE, PEER_VERSION, bench_peers, peers_params
from benches.requests import (
    bench_ping_in_loop,
    bench_ping_roundtrip,
    bench_pipelined,
    bench_requests,
    loop_params,
    ping_params,
    pipelined_params,
    requests_params,
)
from benches.retention import bench_retention, retention_params
from benches.scale import bench_scale, messages_scale_params
from benches.startup import (
    bench_db_bytes,
    bench_file_check,
    bench_startup,
    dataset_params,
    file_check_params,
    startup_params,
)
from benches.summaries import (
    bench_replay,
    bench_rollups,
    bench_summarizers,
    replay_params,
    rollups_params,
    summarizers_params,
)
from benches.vectors import bench_bigvectors, bench_vectors, bigvectors_params, vectors_params

BENCHES: Final[tuple[Bench, ...]] = (
    Bench(
        "ingest_batched",
        "messages/s, batched ingest requests through the daemon subprocess",
        ingest_params,
        bench_ingest_batched,
    ),
    Bench(
        "ingest_batched_engine",
        "messages/s, the same batches through brain.Brain.ingest in-process",
        ingest_params,
        bench_ingest_batched_engine,
    ),
    Bench(
        "ingest_single",
        "requests/s, one-message durable ingest requests, sequential round trips",
        single_params,
        bench_ingest_single,
    ),
    Bench(
        "ping_roundtrip",
        "ping round-trip latency through the subprocess pipes (protocol.client.Client)",
        ping_params,
        bench_ping_roundtrip,
    ),
    Bench(
        "ping_in_loop",
        "ping latency of Dispatcher.prepare + execute inside the event loop (no pipes)",
        loop_params,
        bench_ping_in_loop,
    ),
    Bench(
        "pipelined",
        "requests/s with all requests written at once, answers read by a thread",
        pipelined_params,
        bench_pipelined,
    ),
    Bench(
        "db_bytes_per_message",
        "on-disk bytes per message after ingest + save (db + WAL + payload files)",
        dataset_params,
        bench_db_bytes,
        deterministic=True,
    ),
    Bench(
        "group_commit",
        "durable ingest p50/p95 through the daemon at synchronous=FULL vs group commit: "
        "sequential, and 16 in flight over 1 and 8 sessions; fsync p50 of the disk",
        group_params,
        bench_group_commit,
    ),
    Bench(
        "requests",
        "ping and info p50/p95 through the pipes, brain vs a single-threaded reference loop "
        "on the same database (ratios: the machine is shared)",
        requests_params,
        bench_requests,
    ),
    Bench(
        "startup",
        "ms from spawn to the first ping answer on an existing database",
        startup_params,
        bench_startup,
    ),
    Bench(
        "file_check",
        "us per database-file identity check (before every commit) vs a one-row commit",
        file_check_params,
        bench_file_check,
    ),
    Bench(
        "assemble",
        "Brain.assemble latency (200k budget), raw and after a full sweep, 1k/5k(/100k) messages",
        assemble_params,
        bench_assemble,
    ),
    Bench(
        "sweep",
        "full-sweep (Brain.compact) database ms per message at 5k(/100k) messages",
        sweep_params,
        bench_sweep,
    ),
    Bench(
        "reused_call_ids",
        "fresh tail ms and full-sweep database ms of a 3k-message tool loop whose calls "
        "are all call_0",
        reused_ids_params,
        bench_reused_call_ids,
    ),
    Bench(
        "grep",
        "Brain.grep p50/p95 per mode (full_text, regex, semantic, hybrid) at 10k(/100k/1M)",
        grep_params,
        bench_grep,
    ),
    Bench(
        "vectors",
        "top-10 over StaticEmbedder vectors: exact vs IVF latency, build, recall@10",
        vectors_params,
        bench_vectors,
    ),
    Bench(
        "bigvectors",
        "1M messages through the daemon: first ping, first semantic grep, RSS while loading "
        "the vectors (matrix file absent, then present), matrix bytes, semantic/hybrid p50",
        bigvectors_params,
        bench_bigvectors,
    ),
    Bench(
        "graph",
        "learned retrieval graph through Brain at 1k/5k(/50k) nodes: build, query p50/p95 "
        "(embed vs traverse), teach/learn/correction, maintain, save",
        graph_params,
        bench_graph,
    ),
    Bench(
        "graph_daemon",
        "graph query round trip p50/p95 through our daemon at 1k/5k/100k nodes (the peers "
        "graph, brain alone), with learn and teach; only with --only",
        graph_daemon_params,
        bench_graph_daemon,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "maintain_reads",
        "info/assemble p50/p95/max through the daemon while maintain runs on a 10k "
        "(named in --only: 100k) node graph, and idle",
        maintain_params,
        bench_maintain_reads,
    ),
    Bench(
        "graph_scale",
        "a 10k (named in --only: 100k) node graph through the daemon: first answer, first "
        "query, query and teach p50/p95, maintain",
        scale_params,
        bench_graph_scale,
    ),
    Bench(
        "read_under_write",
        "grep/assemble/query p99 through the daemon, idle and while maintain runs on a 10k "
        "(named in --only: 100k) node graph and while a 5k (50k) message session is swept",
        ruw_params,
        bench_read_under_write,
    ),
    Bench(
        "provider_stall",
        "ingest p50/p95 through the daemon, idle and while 8 provider calls hang "
        "(4 expand_query on the LLM, 4 semantic grep on the embedder)",
        provider_stall_params,
        bench_provider_stall,
    ),
    Bench(
        "stop",
        "ms from SIGTERM / shutdown to exit with a write stuck on another process's lock "
        f"(shutdown_timeout_s {STOP_TIMEOUT_S:g}); only with --only",
        stop_params,
        bench_stop,
        opt_in=True,
    ),
    Bench(
        "unread",
        "peak RSS of a daemon whose client sends 3k/30k assemble requests and reads nothing; "
        "only with --only",
        unread_params,
        bench_unread,
        opt_in=True,
    ),
    Bench(
        "rollups",
        "ms to refresh the rollups after one new day at 30 and 300 days of history, full "
        "refresh s, recent(week) p50; only with --only",
        rollups_params,
        bench_rollups,
        opt_in=True,
    ),
    Bench(
        "retention",
        "a retention pass through the daemon (age 30 days, max bytes 60% of the file): file "
        "bytes before/after, the pass's s, grep and ingest p50/p95 during it and after, and "
        "the VACUUM that switches a pre-v19 file; only with --only",
        retention_params,
        bench_retention,
        opt_in=True,
    ),
    Bench(
        "summarizers",
        "messages/s summarised by the offline summarizers (fact default, extractive_v1), "
        "leaf chunks of 2k and 20k tokens of a LoCoMo conversation, in-process",
        summarizers_params,
        bench_summarizers,
    ),
    Bench(
        "peers",
        f"brain and {PEER_PACKAGE} {PEER_VERSION} side by side through their stdio daemons on "
        "the same graph (query p50/p95, teach, learn, save, startup, maintain, RSS; speedup = "
        "peer / ours); installs the peer in a cached virtualenv; only with --only",
        peers_params,
        bench_peers,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "million",
        "a million messages through the daemon (2,000 conversations, four of 50k interleaved): "
        "ingest msg/s, embedding vectors/s during and after ingest, grep p50/p95 per mode "
        "scoped to a 50k session and unscoped, expand_query, assemble, info, start-up; "
        "only with --only",
        million_params,
        bench_million,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "scale",
        "1M and 3M messages (four 50k sessions interleaved, conversations of 1,000; built "
        "in process once into $BENCH_SCALE_DIR) through the daemon: cold and warm start, "
        "first semantic answer, RSS, disk bytes per message by part, grep p50/p95 in every "
        "mode scoped to 1,000 and 50k messages and unscoped, expand_query, assemble, info; "
        "the figures docs/architecture.md extrapolates to 10M from; only with --only",
        messages_scale_params,
        bench_scale,
        opt_in=True,
        max_runs=1,
    ),
    Bench(
        "replay",
        "a 681-turn LoCoMo-like replay (and the first real LoCoMo conversation, if found) "
        "through the daemon at budget 4,000: settle ms after compacting turns, assembles "
        "covering all history from turn 100, tokens",
        replay_params,
        bench_replay,
    ),
    Bench(
        "host",
        "a host faster than compaction (issue 26), through the daemon: the unpaused tool loop "
        "in OpenAI and Anthropic shape (120 turns, assemble 6,000), a 200-turn Anthropic coding "
        "session with parallel tool calls (8,000, stubs), the first assemble after a 600-message "
        "import, the longest LoCoMo conversation replayed 20 turns a batch (assemble 4,000; "
        "settled share of the budget used, sampled answers verbatim) and every conversation's "
        "evidence in the final context; only with --only",
        host_params,
        bench_host,
        opt_in=True,
        max_runs=1,
    ),
)
BENCH_BY_NAME: Final = {b.name: b for b in BENCHES}
