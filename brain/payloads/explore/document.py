"""Documents: one pass for Markdown signals and code text; Markdown and text summaries.

The pass also scores each language on the text outside code fences (see
``source``). Tested through ``explore`` in tests/brain/payloads/test_explore.py
(its code, Markdown and text tests).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Final

from brain.payloads.explore.source import best_language
from brain.payloads.explore.summary import (
    LINE_CHARS,
    MAX_ITEMS,
    SCAN_LINE_CHARS,
    Summary,
    clip,
    join_limited,
    oneline,
    plural,
)

_HEADING: Final = re.compile(r"(#{1,6})[ \t]+(\S.*?)[ \t#]*$")
_FENCE: Final = re.compile(r" {0,3}(```+|~~~+)[ \t]*([\w+#.-]*)")
_LINK: Final = re.compile(r"\[[^\[\]\n]+\]\([^)\s]+\)")
_TABLE_RULE: Final = re.compile(r" *\|? *:?-{3,}:? *(?:\| *:?-{3,}:? *)+\|? *")


@dataclass(slots=True)
class _Document:
    """One pass over the sample: Markdown signals, and the text outside code fences."""

    first_line: str
    headings: list[tuple[int, str]]
    fences: int = 0
    fence_languages: tuple[str, ...] = ()
    links: int = 0
    tables: int = 0
    nonempty: int = 0
    code_text: str = ""

    @property
    def markdown_score(self) -> int:
        return len(self.headings) + 2 * self.fences + self.links + 2 * self.tables

    def best_language(self, hinted: str | None) -> tuple[str, int]:
        """The language with the most signals (a shebang or the hint weigh in) and its score."""
        return best_language(self.code_text, self.first_line, hinted)


def scan_document(sample: list[str]) -> _Document:
    """Headings, code fences, links and tables of a text sample (Markdown or plain)."""
    doc = _Document(sample[0] if sample else "", [])
    code: list[str] = []
    languages: dict[str, None] = {}
    fence: str | None = None
    previous = ""
    for full in sample:
        line = full[:SCAN_LINE_CHARS]
        doc.nonempty += bool(line.strip())
        opened = _FENCE.match(line)
        if fence is not None:  # inside a fenced block until a bare fence at least as long
            if opened and opened[1].startswith(fence) and not opened[2]:
                fence = None
            continue
        if opened:
            fence = opened[1]
            doc.fences += 1
            if opened[2]:
                languages[opened[2]] = None
            continue
        code.append(line)
        if heading := _HEADING.match(line):
            doc.headings.append((len(heading[1]), heading[2]))
        elif line.startswith("===") and previous.strip() and not line.strip("= \t"):
            doc.headings.append((1, previous.strip()))
        elif _TABLE_RULE.fullmatch(line):
            doc.tables += 1
        doc.links += len(_LINK.findall(line))
        previous = line
    doc.code_text = "\n".join(code)
    doc.fence_languages = tuple(languages)
    return doc


def markdown_summary(doc: _Document, size: str, truncated: bool) -> Summary:
    """The summary of a Markdown document: its counts and heading outline."""
    parts = [plural(len(doc.headings), "heading")]
    if doc.fences:
        langs = f" ({join_limited(list(doc.fence_languages), 40)})" if doc.fence_languages else ""
        parts.append(plural(doc.fences, "code block") + langs)
    if doc.links:
        parts.append(plural(doc.links, "link"))
    if doc.tables:
        parts.append(plural(doc.tables, "table"))
    scope = " in the first 256 KiB" if truncated else ""
    out = [f"Markdown ({size}): " + ", ".join(parts) + scope]
    top = min((level for level, _ in doc.headings), default=1)
    for level, title in doc.headings[:MAX_ITEMS]:
        out.append(clip("  " * (level - top) + "#" * level + " " + oneline(title)))
    return Summary("markdown", out, more=max(len(doc.headings) - MAX_ITEMS, 0))


_WORD_TABLE: Final = bytes(32 if i in b" \t\n\r\x0b\x0c" else 120 for i in range(256))


def text_lines(data: bytes, sample: list[str], size: str) -> list[str]:
    """The lines shown for plain text: its size, word count and first lines."""
    mapped = data.translate(_WORD_TABLE)  # whitespace to " ", everything else to "x"
    words = mapped.count(b" x") + mapped.startswith(b"x")
    firsts = itertools.islice(filter(str.strip, sample), 5)
    return [f"Text ({size}), {plural(words, 'word')}"] + [
        f"> {clip(oneline(line).strip(), LINE_CHARS - 2)}" for line in firsts
    ]
