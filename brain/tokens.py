"""Token estimates.

A cheap, deterministic estimate used for budgets and thresholds, with no model
files: the same text always costs the same.

* ASCII text: one token per four characters, rounded up (English prose in the
  common BPE vocabularies).
* Other text: each CJK, Hangul or Kana character counts as one token (those
  tokenizers give such characters about a token each; counting their three
  UTF-8 bytes at four a token would undercount them by a quarter), and the
  rest counts as its UTF-8 bytes over four (accented Latin, Cyrillic, emoji).
"""

from __future__ import annotations

import functools
import re
from typing import Final

# CJK radicals to CJK unified ideographs (which takes in Hiragana and Katakana,
# U+3040-U+30FF), Hangul syllables, CJK compatibility ideographs, and
# half/full-width forms. One C-level regex pass counts them: never a Python
# loop per character on the hot path.
CJK_CLASS: Final = "[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
"""The characters counted, and searched, as CJK: a regex class that is also a GLOB class."""


# Compiled on first use (~2.5 ms each): ASCII text never needs them, and a
# process that only opens a database should not pay for them at import.
@functools.cache
def _cjk() -> re.Pattern[str]:
    return re.compile(CJK_CLASS)


@functools.cache
def cjk_run() -> re.Pattern[str]:
    """A run of ``CJK_CLASS`` characters (compiled on first use)."""
    return re.compile(CJK_CLASS + "+")


def has_cjk(text: str) -> bool:
    """Whether ``text`` has any character of ``CJK_CLASS``."""
    return not text.isascii() and _cjk().search(text) is not None


def estimate_tokens(text: str) -> int:
    """Return the estimated token count of ``text`` (0 for the empty string)."""
    if text.isascii():
        return (len(text) + 3) // 4
    rest, cjk = _cjk().subn("", text)
    # surrogatepass: a lone surrogate (possible in a str, never in valid
    # UTF-8) must still cost something rather than raise.
    return cjk + (len(rest.encode("utf-8", "surrogatepass")) + 3) // 4


def token_quarters(text: str) -> int:
    """``text``'s cost in quarter tokens; additive, and ``estimate_tokens`` is its ceil / 4."""
    if text.isascii():
        return len(text)
    rest, cjk = _cjk().subn("", text)
    return 4 * cjk + len(rest.encode("utf-8", "surrogatepass"))


MESSAGE_OVERHEAD = 4
"""Tokens a chat API spends per message on role and framing, beyond its content."""

BLOCK_OVERHEAD: Final = 3
"""Tokens each extra content block of a message costs: its type tag, ids, and in
OpenAI shape the separate ``tool`` message a tool result becomes."""

IMAGE_TOKENS: Final = 1_600
"""What an image is estimated to cost. Providers bill images by pixels, not by
the size of their encoding (Anthropic about 1,600 tokens for an image at its
default maximum size, OpenAI up to ~1,100), so a flat upper figure keeps
budgets honest without decoding the image."""


def name_tokens(name: str | None) -> int:
    """What a speaker's name adds to a message: its ``Name: `` prefix (the form
    used where a format has no name field; OpenAI's ``name`` costs about as much)."""
    return estimate_tokens(f"{name}: ") if name else 0


def message_cost(content_tokens: int) -> int:
    """What one message costs in an assembled context."""
    return content_tokens + MESSAGE_OVERHEAD
