"""Words as the fact summarizer weighs them: content terms, stems, stop words and filler.

A term is a lowercased word, stemmed by a few suffix rules (enough that
"painting", "painted" and "paints" meet), that is neither a stop word nor
filler. Filler is the vocabulary of reactions ("awesome", "love", "glad"):
frequent in conversation, never the answer to a question about it.
Tested in tests/brain/lcm/facts/test_words.py.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Final

from brain.tokens import cjk_run

# Full-width punctuation falls in the CJK class: not part of a word.
_CJK_PUNCT: Final = (
    "\u3000\u3001\u3002\u300c\u300d\u300e\u300f\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f"
)
_TOKEN: Final = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

STOP_WORDS: Final = frozenset(
    (  # noqa: SIM905 (a word list reads better as text)
        "a an the and or but nor so yet if then else than that this these those there here "
        "i me my mine myself we us our ours you your yours he him his she her hers it its "
        "they them their theirs who whom whose which what when where why how "
        "am is are was were be been being do does did done doing have has had having "
        "will would shall should can could may might must ought "
        "to of in on at by for from with without into onto about above below over under "
        "up down out off again further once as until while during before after through "
        "all any both each few more most other some such no not only own same too very "
        "just also even ever still now here s t d ll m re ve don't didn't doesn't isn't "
        "i'm i've i'll i'd you're you've you'll it's that's there's what's let's "
        "can't won't wasn't weren't haven't hasn't couldn't wouldn't shouldn't "
        "get got go going went gone make made one ones thing things lot lots really "
        "gonna wanna gotta kinda sorta yeah"
    ).split()
)
"""Function words: never a fact on their own."""

FILLER_WORDS: Final = frozenset(
    (  # noqa: SIM905
        "oh wow hey hi hello yeah yes yep nope ok okay haha lol omg aww aw ah hmm "
        "thanks thank thx please sorry congrats congratulations cheers bye "
        "awesome amazing great good nice cool lovely wonderful fantastic incredible "
        "beautiful gorgeous fun glad happy proud excited exciting sweet cute "
        "love loved loving like liked totally absolutely definitely surely sure "
        "think thought know knew feel feeling felt sound sounds seem seems look looks "
        "hope hoping wish appreciate mean means kind bit stuff something anything "
        "everything way time times much many well always never sometimes maybe "
        "keep keeping want wanted need glad tell telling say said talk talking "
        "super pretty quite truly honestly actually basically literally"
    ).split()
)
"""Reactions and hedges: frequent in conversation, never what a question asks for."""


@functools.lru_cache(maxsize=65_536)  # a chunk says the same words again and again
def stem(word: str) -> str:
    """``word`` (lowercase) without its common English inflection: a light, fixed rule set."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ied", "y"), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + keep
            # "running" -> "runn" -> "run"; "hoped" -> "hop" is close enough.
            if keep == "" and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            return word
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _without_clitic(token: str) -> str:
    """``token`` without its clitic: "daughter's" -> "daughter", "they've" -> "they",
    "isn't" -> "not". A possessive or contraction is its word, not a new one (and never
    a number: "we've" is no quantity)."""
    head, _, tail = token.partition("'")
    if not tail:
        return token
    if tail == "t":
        return "not"  # "isn't", "won't"
    return head if tail in _CLITICS else token


_CLITICS: Final = frozenset(("s", "ve", "re", "d", "ll", "m"))


def tokens(text: str) -> list[str]:
    """The lowercased word tokens of ``text`` (a possessive or contraction as its word:
    ``_without_clitic``), and its runs of CJK characters, which have no spaces to split
    at (a run counts as a word)."""
    found = [
        _without_clitic(t) if "'" in t else t
        for t in _TOKEN.findall(text.lower().replace("\u2019", "'"))
    ]
    if not text.isascii():
        found += [r for r in (run.strip(_CJK_PUNCT) for run in cjk_run().findall(text)) if r]
    return found


def terms(text: str, *, filler: bool = False) -> list[str]:
    """The stemmed content terms of ``text`` in order (stop words dropped; filler too,
    or with ``filler`` only the filler words)."""
    out = []
    for token in tokens(text):
        if token in STOP_WORDS or (token in FILLER_WORDS) != filler:
            continue
        if len(token) < 3 and not token.isdigit():
            continue
        out.append(stem(token))
    return out


_VOCABULARY: Final = (
    Path(__file__).resolve().parents[2] / "models" / "minilm-onnx" / "tokenizer.json"
)
_COMMON_RANK: Final = 2_000  # the first ~2,000 words of the vocabulary: "the" to "time"


@functools.cache
def _ranks() -> dict[str, int]:
    """Word -> rank in the shipped WordPiece vocabulary, which lists whole words
    roughly by frequency in its training text (empty when the file is missing)."""
    try:
        vocab = json.loads(_VOCABULARY.read_text(encoding="utf-8"))["model"]["vocab"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {w: int(r) for w, r in vocab.items() if w.isalpha() and w.isascii()}


@functools.lru_cache(maxsize=65_536)
def rarity(word: str) -> float:
    """How uncommon an English word is, from 0 (among the commonest) to 1 (not a whole
    word of the vocabulary at all): "time" 0, "pottery" 0.67, "margarine" 1."""
    ranks = _ranks()
    if not ranks:
        return 0.5
    rank = ranks.get(word)
    if rank is None:
        return 1.0
    low, high = math.log(_COMMON_RANK), math.log(len(ranks) + _COMMON_RANK)
    return min(1.0, max(0.0, (math.log(rank) - low) / (high - low)))
