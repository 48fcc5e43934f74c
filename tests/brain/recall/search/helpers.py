"""Messages the grep tests search, stored through the engine."""

from __future__ import annotations

from brain import Brain, MessageIn


def fill(brain: Brain) -> None:
    brain.ingest(
        "s",
        [
            MessageIn(
                "user",
                "The deploy of service alpha failed at 14:02",
                client_id="u1",
                created_at="2026-01-01T10:00:00Z",
            ),
            MessageIn(
                "assistant",
                "The database migration timed out; see /var/log/app.log",
                client_id="a1",
                created_at="2026-01-02T10:00:00Z",
            ),
            MessageIn(
                "user",
                "東京のサーバーで障害が発生しました",
                client_id="u2",
                created_at="2026-01-03T10:00:00Z",
            ),
        ],
    )
    brain.ingest("t", [MessageIn("user", "alpha release notes", client_id="x1")], session_key="k")


def fill_cjk(brain: Brain) -> None:
    brain.ingest(
        "s",
        [
            MessageIn("user", "東京のサーバーで障害が発生しました", client_id="ja"),
            MessageIn("assistant", "我们明天去北京开会", client_id="zh"),
            MessageIn("user", "서버 점검은 내일입니다", client_id="ko"),
            MessageIn("user", "plain English about servers", client_id="en"),
        ],
    )
