"""Entity extraction: the names, identifiers, quantities and dates a text mentions.

Deterministic and LLM-free, so ingest can run it inside its transaction and a
query can run it on the same terms: a handful of regular expressions, applied in
priority order, each claiming its characters so that a URL's path is not also a
path and a version's digits are not also a quantity. Every entity has a ``kind``
and a ``key``, its case-folded, whitespace-collapsed form: two mentions are of
one entity exactly when kind and key agree. Spans are character offsets into
the text given (Python ``str`` indices).

Tested in tests/brain/lcm/entities/test_extract.py (examples, and properties:
never raises, spans lie within the text and cover what they name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import regex

KINDS: Final = (
    "url",
    "path",
    "code",
    "error",
    "version",
    "date",
    "quantity",
    "identifier",
    "name",
)
"""Every kind of entity, in the order extraction claims text."""

MAX_TEXT: Final = 64 * 1024
"""Only the first this-many characters of a message are read: a pasted log
would cost ingest milliseconds for entities nobody looks up by name."""
MAX_KEY: Final = 200
"""Longer candidates (a minified line in backticks) are not entities."""

_MONTHS: Final = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_WEEKDAYS: Final = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_UNITS: Final = (
    "%|percent|km|m|cm|mm|kg|g|mg|lbs?|pounds?|miles?|mi|feet|ft|inch(?:es)?|meters?|"
    "kilometers?|kilograms?|grams?|liters?|litres?|l|ml|gb|mb|kb|tb|gib|mib|kib|ms|"
    "seconds?|secs?|s|minutes?|mins?|h|hours?|hrs?|days?|weeks?|months?|years?|yrs?|"
    "°c|°f|degrees?|dollars?|euros?|usd|eur|gbp|x|k"
)

_EXTENSIONS: Final = (
    "py|js|ts|tsx|jsx|rs|go|java|c|h|cpp|hpp|rb|sh|md"
    "|json|yaml|yml|toml|ini|cfg|txt|csv|log|sql|html|css|lock"
)
_FILE_EXTENSION: Final = regex.compile(rf"\.(?:{_EXTENSIONS})\b")
_DATE_HINT: Final = regex.compile(
    r"\b(?:[Jj]an|[Ff]eb|[Mm]ar|[Aa]pr|[Mm]ay|[Jj]un|[Jj]ul|[Aa]ug|[Ss]ep|[Oo]ct|[Nn]ov|[Dd]ec"
    r"|JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC)|\d-\d\d-|\d/\d"
)
_VERSION_HINT: Final = regex.compile(r"\d\.\d|v\d")
_ERRNO_HINT: Final = regex.compile(r"E[A-Z]{3}")
_DIGIT: Final = regex.compile(r"[\d$\u20ac\u00a3]")

# Priority order: earlier patterns claim their characters first.
_PATTERNS: Final[tuple[tuple[str, regex.Pattern[str]], ...]] = (
    ("url", regex.compile(r"\b(?:https?|ftp)://[^\s<>\"'`]+", regex.I)),
    ("code", regex.compile(r"`([^`\n]{2,120})`")),
    (
        "path",
        regex.compile(
            r"(?<![\w/])(?:~|\.{1,2})?(?:/[\w.@+\-]+){2,}/?"
            r"|(?<![\w/])[A-Za-z]:\\(?:[\w.\-]+\\?)+"
        ),
    ),
    ("path", regex.compile(rf"\b[\w\-]+(?:/[\w\-]+)*\.(?:{_EXTENSIONS})\b")),
    (
        "error",
        regex.compile(
            r"\b(?:E[A-Z]{3,}|[A-Z]{1,4}\d{3,5}|(?:HTTP|status|error|code)\s+[1-5]\d\d)\b"
        ),
    ),
    ("error", regex.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b")),
    (
        "version",
        regex.compile(r"(?<![\w.])v?\d+\.\d+(?:\.\d+)+(?:[-+][\w.]+)?\b|\bv\d+(?:\.\d+)?\b"),
    ),
    (
        "date",
        regex.compile(
            r"\b\d{4}-\d{2}-\d{2}\b"
            rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\.?,?(?:\s+\d{{4}})?\b"
            rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
            rf"|\b(?:{_MONTHS})\.?\s+\d{{4}}\b"
            r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b",
            regex.I,
        ),
    ),
    (
        "quantity",
        regex.compile(
            rf"(?:[$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion))?\b)"
            rf"|\b\d[\d,]*(?:\.\d+)?\s?(?:{_UNITS})(?![\w])",
            regex.I,
        ),
    ),
    ("identifier", regex.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")),  # snake_case
    (
        "identifier",
        regex.compile(
            r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
            r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # PascalCase
        ),
    ),
    ("identifier", regex.compile(r"(?<![\w-])--?[a-z][a-z0-9\-]+\b(?=[\s=]|$)")),  # a flag
    # Capitalised words, a run of them joined by spaces (or "of"/"de"/"van" between),
    # and all-caps acronyms of two to six letters.
    (
        "name",
        regex.compile(
            r"\b\p{Lu}[\p{Ll}\p{Lu}'\u2019\-]*\p{Ll}[\p{Ll}'\u2019\-]*"
            r"(?:\s+(?:(?:of|de|da|van|von|del|la|le)\s+)?\p{Lu}[\p{Ll}'\u2019\-]*\p{Ll}[\p{Ll}'\u2019\-]*)*\b"
            r"|\b\p{Lu}{2,6}\b"
        ),
    ),
)

# Capitalised words that are almost never names: sentence openers, pronouns,
# greetings, months and weekdays (dates have their own kind).
_NOT_NAMES: Final = frozenset(
    (  # noqa: SIM905 (a word list reads better as text)
        "i im i'm ive i've id i'd ill i'll a an the this that these those there here it its "
        "it's he she we they you your yours my mine our ours his her hers their them me us "
        "and but or so if then when while what which who whom whose why how where yes no not "
        "ok okay oh hey hi hello thanks thank wow yeah yep nope sure good nice cool "
        "well also just maybe really actually anyway still even though although because "
        "after before since until as at by for from in into of on onto to with without about "
        "do does did done have has had be is are was were been being can could would should "
        "will shall may might must let lets let's please sorry congrats congratulations "
        "all any some many much more most every each both either neither one two three "
        "first second last next other another same such very too only own "
        "today tomorrow yesterday tonight now soon later once again always never sometimes "
        "love awesome amazing wonderful absolutely definitely totally sounds looks seems "
        "glad happy sad i'm wish hope think know see got get go going went "
        "ai api id ok tv usa uk"
    ).split()
    + _MONTHS.split("|")
    + _WEEKDAYS.split("|")
    + [d + "s" for d in _WEEKDAYS.split("|")]
)


_WORD: Final = regex.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Mention:
    """One entity mentioned in a text: ``text[start:end]`` is what was written."""

    kind: str
    key: str
    text: str
    start: int
    end: int


_POSSESSIVE: Final = regex.compile(r"['\u2019]s?$", regex.I)
"""A trailing 's (or a plural's bare apostrophe) on a name."""


def entity_key(text: str) -> str:
    """The form two mentions of one entity share: case-folded, whitespace collapsed."""
    return " ".join(text.casefold().split())


def extract(text: str) -> list[Mention]:
    """The entities ``text`` mentions, in text order, each occurrence once.

    Never raises on any string; reads at most ``MAX_TEXT`` characters.
    """
    head = text[:MAX_TEXT]
    claimed = bytearray(len(head))
    found: list[Mention] = []
    gates = _gates(head)
    for (kind, pattern), gate in zip(_PATTERNS, gates, strict=True):
        if not gate:
            continue
        for match in pattern.finditer(head):
            group = 1 if kind == "code" else 0
            start, end = match.span(group)
            start, end = _trim(head, start, end)
            if end <= start or any(claimed[start:end]):
                continue
            written = head[start:end]
            mention = _mention(kind, written, start, end)
            if mention is None:
                continue
            claimed[start:end] = b"\x01" * (end - start)
            found.append(mention)
    found.sort(key=lambda m: m.start)
    return found


def _gates(text: str) -> tuple[bool, ...]:
    """Which of ``_PATTERNS`` can match at all, by a cheap look for what each needs.

    Most messages are prose: skipping the patterns that cannot match saves a good
    part of the extraction (``ingest_batched_engine`` in scripts/bench.py).
    """
    digit = _DIGIT.search(text) is not None
    return (
        "://" in text,  # url
        "`" in text,  # code
        "/" in text or "\\" in text,  # path (directories)
        "." in text and _FILE_EXTENSION.search(text) is not None,  # path (a file name)
        digit or _ERRNO_HINT.search(text) is not None,  # error (codes)
        "Error" in text or "Exception" in text,  # error (names)
        digit and _VERSION_HINT.search(text) is not None,  # version
        _DATE_HINT.search(text) is not None,  # date
        digit,  # quantity
        "_" in text,  # identifier (snake_case)
        True,  # identifier (camelCase, PascalCase)
        "-" in text,  # identifier (flags)
        True,  # name
    )


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Drop sentence punctuation a greedy pattern took at the end (a URL before a full stop)."""
    while end > start and text[end - 1] in ".,;:!?)]}'\"\u2019":
        end -= 1
    return start, end


def _mention(kind: str, written: str, start: int, end: int) -> Mention | None:
    key = entity_key(written)
    if not key or len(key) > MAX_KEY:
        return None
    if kind == "name":
        # Leading filler ("Thanks Caroline" -> "caroline") would split one name into
        # many keys; a name that is nothing but filler is none.
        words = list(_WORD.finditer(written))
        skip = 0
        while skip < len(words) and entity_key(words[skip].group()) in _NOT_NAMES:
            skip += 1
        if skip == len(words):
            return None
        offset = words[skip].start()
        written, start = written[offset:], start + offset
        # A possessive names the same entity: "Caroline's" is Caroline.
        possessive = _POSSESSIVE.search(written)
        if possessive is not None:
            written, end = written[: possessive.start()], end - len(possessive.group())
        key = entity_key(written)
        if " " not in key and len(key) < 2:
            return None
    return Mention(kind, key, written, start, end)
