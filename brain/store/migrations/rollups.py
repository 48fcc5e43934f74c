"""The time rollups' schema (``brain.lcm.rollups``), one script appended after the others.

Kept in its own module so the other migration ranges stay untouched; the version it
takes the schema to is its place in ``brain.store.schema.MIGRATIONS``. Tested in
tests/brain/lcm/rollups/ (an older database's leaves are queued and rolled up) and
tests/brain/store/test_schema.py (migrations in order, idempotent).
"""

from __future__ import annotations

from typing import Final

# Rollups are derived data: a day's or a week's leaf summaries of one scope (a
# session key, or a session filed under none) condensed into one node. ``rollups``
# holds one row per (scope, period, start); ``conversations`` lists the conversation
# ids its leaves came from (JSON, so a read scoped to one session can tell whether it
# may see all of it), ``session_id`` the session of its newest leaf (what a search
# hit names). ``rollup_sources`` are its leaves, in time order. ``rollups_fts``
# indexes the text, kept in step by triggers. ``rollup_backlog`` queues the leaves
# whose periods need refreshing: every stored leaf, and every leaf suppressed,
# withheld or shown again, through triggers on ``summaries`` (so no writer of
# summaries needs to know about rollups); ``brain.lcm.rollups.build`` drains it.
# Leaves stored before this version are queued here, so an upgraded database gets
# its rollups from the first refresh. ``IF NOT EXISTS``: a database rolled back to
# an older version by hand (as the upgrade tests do) keeps these tables.
ROLLUPS: Final = """
CREATE TABLE IF NOT EXISTS rollups (
    id            INTEGER PRIMARY KEY,
    rollup_id     TEXT NOT NULL UNIQUE,
    scope_kind    TEXT NOT NULL CHECK (scope_kind IN ('session_key', 'session')),
    scope         TEXT NOT NULL,
    period        TEXT NOT NULL CHECK (period IN ('day', 'week')),
    start_at      TEXT NOT NULL,
    end_at        TEXT NOT NULL,
    content       TEXT NOT NULL,
    token_count   INTEGER NOT NULL,
    earliest_at   TEXT NOT NULL,
    latest_at     TEXT NOT NULL,
    leaf_count    INTEGER NOT NULL,
    conversations TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    summarizer    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (scope_kind, scope, period, start_at)
);
CREATE INDEX IF NOT EXISTS rollups_time ON rollups(start_at);
CREATE TABLE IF NOT EXISTS rollup_sources (
    rollup_id  INTEGER NOT NULL REFERENCES rollups(id) ON DELETE CASCADE,
    ordinal    INTEGER NOT NULL,
    summary_id INTEGER NOT NULL REFERENCES summaries(id),
    PRIMARY KEY (rollup_id, ordinal)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rollup_sources_summary ON rollup_sources(summary_id);
CREATE VIRTUAL TABLE IF NOT EXISTS rollups_fts USING fts5(
    content, content='rollups', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS rollups_fts_insert AFTER INSERT ON rollups BEGIN
    INSERT INTO rollups_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER IF NOT EXISTS rollups_fts_delete AFTER DELETE ON rollups BEGIN
    INSERT INTO rollups_fts (rollups_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER IF NOT EXISTS rollups_fts_update AFTER UPDATE OF content ON rollups BEGIN
    INSERT INTO rollups_fts (rollups_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO rollups_fts (rowid, content) VALUES (new.id, new.content);
END;
CREATE INDEX IF NOT EXISTS summaries_leaf_time ON summaries(conversation_id, latest_at)
    WHERE kind = 'leaf';
CREATE TABLE IF NOT EXISTS rollup_backlog (summary_id INTEGER PRIMARY KEY);
INSERT OR IGNORE INTO rollup_backlog (summary_id) SELECT id FROM summaries WHERE kind = 'leaf';
CREATE TRIGGER IF NOT EXISTS summaries_rollup_insert AFTER INSERT ON summaries
WHEN new.kind = 'leaf' BEGIN
    INSERT OR IGNORE INTO rollup_backlog (summary_id) VALUES (new.id);
END;
CREATE TRIGGER IF NOT EXISTS summaries_rollup_hidden AFTER UPDATE OF suppressed_at, hidden_by
ON summaries WHEN new.kind = 'leaf' BEGIN
    INSERT OR IGNORE INTO rollup_backlog (summary_id) VALUES (new.id);
END;
"""

SCRIPTS: Final[tuple[str, ...]] = (ROLLUPS,)
"""The rollups' migration."""
