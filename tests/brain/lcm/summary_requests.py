"""Summary requests the summarizer tests share: conversations and a strategy of requests."""

from __future__ import annotations

from hypothesis import strategies as st

from brain.lcm.extractive import ExtractiveSummarizer
from brain.lcm.summary_contract import EXPAND_PREFIX, SourceItem, SummaryRequest

extractive = ExtractiveSummarizer()


def _at(minute: int) -> str:
    return f"2026-11-22T{14 + minute // 60:02d}:{minute % 60:02d}:00.000Z"


def _leaf(
    *texts: str, target_tokens: int = 400, previous: str | None = None, aggressive: bool = False
) -> SummaryRequest:
    """A leaf request over ``texts``, alternately from user and assistant, a minute apart."""
    items = tuple(
        SourceItem(f"msg_{i}", ("user", "assistant")[i % 2], text, _at(i))
        for i, text in enumerate(texts)
    )
    return SummaryRequest("leaf", 0, items, target_tokens, previous, aggressive)


def _body_and_footer(summary: str) -> tuple[str, str]:
    body, _, footer = summary.rpartition("\n")
    assert footer.startswith(EXPAND_PREFIX), summary
    return body, footer.removeprefix(EXPAND_PREFIX)


CHATTER = [
    "Okay, thanks!",
    "Sure.",
    "Sounds good to me, nothing to add from my side right now honestly.",
    "Hmm, that is an interesting way to look at the whole situation.",
]
WORK = [
    "We decided to keep the busy timeout at 5000 ms until the benchmark on 2026-12-01.",
    "Running `pytest tests/brain -q` failed with exit code 1 in tests/brain/test_store.py.",
    "Traceback: apsw.BusyError: database is locked while Priya ran the maintenance job.",
    "The WAL notes are at https://sqlite.org/wal.html and explain checkpoint starvation.",
    "Marcus will move the loader into brain/config.py next week.",
]


def _conversation(n: int) -> tuple[str, ...]:
    texts = []
    for i in range(n):
        work = WORK[i % len(WORK)].replace("5000", str(5000 + i))
        texts.append(f"{CHATTER[i % len(CHATTER)]} {work} {CHATTER[(i + 1) % len(CHATTER)]}")
    return tuple(texts)


_VOCABULARY = (
    "the a we decided will should error failed Priya Marcus deploy cache timeout retry plan "
    "database locked tomorrow because it's fine ok thanks"
)
_words = st.sampled_from(_VOCABULARY.split(" "))
_fragments = st.one_of(
    _words,
    _words,
    _words,
    st.integers(-10_000, 10**9).map(str),
    st.sampled_from(["brain/store.py", "/etc/hosts", "~/notes.md", "`git push`", "$ ls -la"]),
    st.sampled_from(["https://example.org/a?b=1", "ValueError:", "exit code 2", "Traceback"]),
    st.datetimes().map(lambda d: d.isoformat()),
    st.text(alphabet="数据库被锁定了我们决定明天再试好的こんにちは한국어", min_size=1, max_size=12),
    st.sampled_from([".", "!", "?", ",", "\n", "\n\n", " - ", "。", "\uff1a", "😀"]),
    st.text(max_size=8),
)
_texts = st.lists(_fragments, max_size=60).map(" ".join)


@st.composite
def requests(draw: st.DrawFn) -> SummaryRequest:
    n = draw(st.integers(1, 25))
    depth = draw(st.integers(0, 4))
    minutes = sorted(draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n)))
    items = []
    for i, minute in enumerate(minutes):
        text = draw(_texts)
        if depth:
            if draw(st.booleans()):
                text += f"\n{EXPAND_PREFIX}" + draw(_texts)
            items.append(SourceItem(f"sum_{i}", "summary", text, _at(minute), _at(minute // 2)))
        else:
            role = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
            items.append(SourceItem(f"msg_{i}", role, text, _at(minute)))
    return SummaryRequest(
        "condensed" if depth else "leaf",
        depth,
        tuple(items),
        target_tokens=draw(st.integers(8, 3_000)),
        previous=draw(st.none() | _texts),
        aggressive=draw(st.booleans()),
    )
