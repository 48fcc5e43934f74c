"""The learned graph through a real daemon: teach, query, correction, learn, trace, restart."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Spawn, serve_argv


def test_teach_query_correct_and_learn_over_the_protocol_and_across_a_restart(
    db_path: Path, spawn: Spawn
) -> None:
    first = spawn(serve_argv(db_path))
    taught = first.call(
        1, "teach", {"content": "The staging cluster is called kestrel", "dedup_key": "k"}
    )["result"]
    assert taught["created"] is True
    node = taught["node_id"]
    again = first.call(2, "teach", {"content": "kestrel again", "dedup_key": "k"})["result"]
    assert again["node_id"] == node
    assert again["created"] is False
    found = first.call(3, "query", {"query": "which staging cluster?", "chat_id": "c1"})["result"]
    assert found["fired_nodes"] == [node]
    assert "kestrel" in found["context"]
    assert found["seeds"][0][0] == node
    assert {"embed_query_ms", "traverse_ms", "total_ms"} <= set(found)
    fix = first.call(
        4, "correction", {"content": "Staging moved to the osprey cluster", "chat_id": "c1"}
    )["result"]
    assert fix["penalised_trace"] == found["trace_id"]
    assert fix["inhibited"] == [node]
    info = first.call(5, "info")["result"]
    assert info["nodes"] == 2
    assert info["edges"] >= 1
    code, _ = first.finish()
    assert code == 0

    second = spawn(serve_argv(db_path))
    trace = second.call(6, "trace", {"chat_id": "c1"})["result"]
    assert trace["trace_id"] == found["trace_id"]
    after = second.call(7, "query", {"query": "which staging cluster?", "chat_id": "c1"})
    fired = after["result"]["fired_nodes"]
    assert fired[0] == fix["node_id"]
    assert node not in fired
    learned = second.call(8, "learn", {"outcome": 1, "chat_id": "c1"})["result"]
    assert learned["trace_id"] == after["result"]["trace_id"]
    bad = second.call(9, "learn", {"outcome": 3})
    assert bad["error"]["code"] == -32602
    missing = second.call(10, "trace", {"trace_id": "tr_0000000000000000"})
    assert missing["error"]["code"] == -32001
    code, _ = second.finish()
    assert code == 0


def test_assemble_with_recall_on_shows_the_graph_block_over_the_protocol(
    db_path: Path, spawn: Spawn
) -> None:
    daemon = spawn(serve_argv(db_path, "--recall-mode", "shadow"))
    daemon.call(1, "teach", {"content": "The staging cluster is called kestrel"})
    question = {"role": "user", "content": "which staging cluster do we use?"}
    daemon.call(2, "ingest", {"session": "s", "message": question})
    shadow = daemon.call(3, "assemble", {"session": "s", "budget": 2_000})["result"]
    assert shadow["recall"]["mode"] == "shadow"
    assert shadow["recall"]["injected"] is False
    shown = daemon.call(4, "assemble", {"session": "s", "budget": 2_000, "recall": "on"})
    result = shown["result"]
    assert result["recall"]["injected"] is True
    assert any("kestrel" in str(m["content"]) for m in result["messages"])
    off = daemon.call(5, "assemble", {"session": "s", "budget": 2_000, "recall": "off"})
    assert "recall" not in off["result"]
    bad = daemon.call(6, "assemble", {"session": "s", "budget": 2_000, "recall": "loud"})
    assert bad["error"]["code"] == -32602
    code, _ = daemon.finish()
    assert code == 0


def test_a_synced_chat_log_is_ranked_by_the_learned_node_stage_over_the_protocol(
    db_path: Path, spawn: Spawn, tmp_path: Path
) -> None:
    from tests.brain.recall.search.test_node_ranking import chat_log

    chat_log(tmp_path / "ws")
    daemon = spawn(serve_argv(db_path))
    daemon.call(1, "sync", {"workspace": str(tmp_path / "ws")})
    options = {"top_k": 20, "threshold": 0.001, "max_hops": 0, "max_fired": 20}
    for i, (day, heading) in enumerate([("8 May 2023", "### D2:2"), ("20 June 2023", "### D1:2")]):
        found = daemon.call(
            2 + i, "query", {"query": f"What did Caroline repaint on {day}?", **options}
        )["result"]
        turns = [n for n in found["nodes"] if "boathouse" in n["text"]]
        assert turns[0]["text"].startswith(heading)
    code, _ = daemon.finish()
    assert code == 0


def test_the_first_query_after_a_restart_and_one_after_a_teach_are_seeded_by_keyword(
    db_path: Path, spawn: Spawn
) -> None:
    # The nodes' keyword ranking is kept in memory (brain.graph.keywords): built by the
    # first query of a process, and brought up to date by the query after a write.
    from tests.brain.graph.test_seeding import FAR, NEAR, QUERY

    first = spawn(serve_argv(db_path))
    far = first.call(1, "teach", {"content": FAR})["result"]["node_id"]
    for i, text in enumerate(NEAR):
        first.call(2 + i, "teach", {"content": text})
    code, _ = first.finish()
    assert code == 0

    second = spawn(serve_argv(db_path))
    found = second.call(10, "query", {"query": QUERY, "top_k": 2, "record": False})["result"]
    assert found["seeds"][0][0] == far
    assert found["fired_nodes"][0] == far
    osprey = "Parking, toner, invoices, badges, desks: the osprey rollout is done"
    taught = second.call(11, "teach", {"content": osprey})["result"]["node_id"]
    question = "When did the osprey migration finish?"
    again = second.call(12, "query", {"query": question, "top_k": 2, "record": False})["result"]
    assert again["seeds"][0][0] == taught
    code, _ = second.finish()
    assert code == 0
