"""Source code payloads: which language, and its doc comment, definitions and imports.

The patterns are data (``languages``), compiled here on first use. Names come
from the head sample, lines clipped to a few hundred characters. Tested
through ``explore`` in tests/brain/payloads/test_explore.py (the code section).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

from brain.payloads.explore.languages import (
    DIALECTS,
    DISPLAY,
    LANGUAGES,
    SHEBANG_LANGUAGES,
    LanguagePatterns,
)
from brain.payloads.explore.summary import (
    LINE_CHARS,
    SCAN_LINE_CHARS,
    clip,
    join_limited,
    oneline,
)

_SHEBANG: Final = re.compile(r"#!.*\b(python[\d.]*|node|deno|bun|(?:ba|z|k|da)?sh)\b")


@dataclass(frozen=True, slots=True)
class _Language:
    name: str
    signals: re.Pattern[str]
    """Every match counts towards detecting the language."""
    symbols: dict[str, re.Pattern[str]]
    """Plural label to a top-level definition pattern: group ``name`` (or ``alt``),
    and for methods maybe ``owner``."""
    imports: re.Pattern[str] | None
    comment: re.Pattern[str]
    """A comment or docstring line; group ``text`` is its content."""
    dialect: tuple[str, re.Pattern[str]] | None
    """A dialect named instead when its pattern matches (TypeScript, C++)."""


def _compile(spec: LanguagePatterns) -> _Language:
    """Compile a language's patterns, where a space matches a space or a tab.

    Patterns work line by line (``[ \\t]`` never crosses a newline), so a space
    inside a character class is written ``\\x20``.
    """
    flags = re.IGNORECASE if spec.ignore_case else 0

    def rx(*alternatives: str) -> re.Pattern[str]:
        source = "|".join(alternatives).replace(" ", "[ \t]")
        return re.compile(source, re.MULTILINE | flags)

    return _Language(
        spec.name,
        rx(*spec.signals),
        {label: rx(pattern) for label, pattern in spec.symbols.items()},
        None if spec.imports is None else rx(spec.imports),
        rx(spec.comment),
        None if spec.dialect is None else (spec.dialect[0], rx(*spec.dialect[1])),
    )


@functools.cache
def _by_name() -> dict[str, _Language]:
    """Every language compiled, by name, in the table's order (compiled once, on first use)."""
    return {spec.name: _compile(spec) for spec in LANGUAGES}


def best_language(code_text: str, first_line: str, hinted: str | None) -> tuple[str, int]:
    """The language with the most signals (a shebang or the hint weigh in) and its score."""
    languages = _by_name()
    scores = {name: len(lang.signals.findall(code_text)) for name, lang in languages.items()}
    if shebang := _SHEBANG.match(first_line):
        word = shebang[1]
        scores["python" if word.startswith("py") else SHEBANG_LANGUAGES.get(word, "shell")] += 5
    base = DIALECTS.get(hinted or "", hinted)
    if base is not None:
        scores[base] += 2
    best = max(scores, key=lambda name: (scores[name], name == base))
    dialect = languages[best].dialect
    if hinted is not None and base == best:
        language = hinted if hinted in DIALECTS else best
    else:
        language = best
    if language == best and dialect is not None and dialect[1].search(code_text):
        language = dialect[0]
    return language, scores[best]


def code_lines(language: str, sample: list[str], size: str, truncated: bool) -> list[str]:
    """The lines shown for source code: language, leading comment and the symbols it defines."""
    spec = _by_name()[DIALECTS.get(language, language)]
    text = "\n".join(line[:SCAN_LINE_CHARS] for line in sample)
    scope = "; names from the first 256 KiB" if truncated else ""
    out = [f"{DISPLAY[language]} code ({size}){scope}"]
    if doc := _first_comment(spec, sample):
        out.append(f"doc: {clip(doc, LINE_CHARS - 5)}")
    for label, pattern in spec.symbols.items():
        names = []
        for match in pattern.finditer(text):
            groups = match.groupdict()
            name = (groups["name"] or groups.get("alt") or "").strip()
            names.append(f"{groups['owner']}.{name}" if groups.get("owner") else name)
        if names:
            out.append(_named_list(label, names))
    if spec.imports is not None and (imports := [m["name"] for m in spec.imports.finditer(text)]):
        out.append(_named_list("imports", [name.strip() for name in imports]))
    return out


def _named_list(label: str, names: list[str]) -> str:
    unique = list(dict.fromkeys(clip(name, 40) for name in names))
    prefix = f"{label} ({len(unique):,}): "
    return prefix + join_limited(unique, LINE_CHARS - len(prefix))


def _first_comment(spec: _Language, sample: list[str]) -> str | None:
    """The first comment or docstring text in the first lines, skipping pragmas."""
    in_docstring = False
    for full in sample[:60]:
        line = full[:SCAN_LINE_CHARS]
        found = spec.comment.match(line)
        text = oneline(found["text"] if found else line).strip(" \"'*/#-")
        pragma = text.lower().startswith(("-*-", "coding", "type:", "noqa", "!", "eslint"))
        if (found or in_docstring) and text and not pragma:
            return text
        in_docstring = found is not None and ('"""' in line or "'''" in line)
    return None
