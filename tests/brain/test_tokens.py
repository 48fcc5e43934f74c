"""brain.tokens: the estimate (ASCII fast path, CJK-aware otherwise) and the overheads."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brain.tokens import (
    BLOCK_OVERHEAD,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD,
    estimate_tokens,
    message_cost,
    token_quarters,
)

_CJK_RANGES = (
    (0x2E80, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x3040, 0x30FF),
    (0xFF00, 0xFFEF),
)


def _reference(text: str) -> int:
    """The rule spelled out one character at a time (the real one never loops)."""
    cjk = 0
    other = 0
    for ch in text:
        if any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES):
            cjk += 1
        else:
            other += len(ch.encode("utf-8", "surrogatepass"))
    return cjk + (other + 3) // 4


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("a", 1),
        ("abcd", 1),
        ("abcde", 2),
        ("hello world", 3),
    ],
)
def test_ascii_text_costs_a_token_per_four_characters_rounded_up(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("中文字符", 4),  # CJK unified ideographs
        ("안녕하세요", 5),  # Hangul syllables
        ("ひらがなカタカナ", 8),  # Kana
        ("\uff21\uff22\uff23", 3),  # full-width forms
        ("\uf900\u2e80", 2),  # compatibility ideograph, CJK radical
    ],
)
def test_cjk_hangul_and_kana_characters_cost_a_token_each(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("héllo", 2),  # 6 bytes
        ("Привет", 3),  # 12 bytes
        ("😀", 1),  # 4 bytes
        ("😀😀x", 3),  # 9 bytes
    ],
)
def test_other_non_ascii_text_costs_its_utf8_bytes_over_four(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_mixed_text_counts_cjk_per_character_and_the_rest_by_bytes() -> None:
    # 2 ideographs + "hello " (6 bytes -> 2 tokens)
    assert estimate_tokens("hello 世界") == 4


def test_a_lone_surrogate_is_counted_not_raised() -> None:
    assert estimate_tokens("a\ud800b") == 2


@given(st.text())
def test_estimate_matches_the_rule_applied_per_character(text: str) -> None:
    assert estimate_tokens(text) == _reference(text)


@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_estimate_is_length_over_four(text: str) -> None:
    assert estimate_tokens(text) == (len(text) + 3) // 4


@given(st.text(), st.text())
def test_joining_texts_never_costs_more_than_both_apart(a: str, b: str) -> None:
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)


def test_message_cost_adds_the_per_message_overhead() -> None:
    assert message_cost(10) == 10 + MESSAGE_OVERHEAD == 14


def test_block_overhead_is_small_and_an_image_costs_a_flat_figure() -> None:
    assert 0 < BLOCK_OVERHEAD <= MESSAGE_OVERHEAD
    assert IMAGE_TOKENS > 1_000


def test_token_quarters_add_up_and_round_to_the_estimate() -> None:
    for a, b in [("abc", "東京"), ("é", "、x"), ("", "サーバー")]:
        assert token_quarters(a + b) == token_quarters(a) + token_quarters(b)
        assert estimate_tokens(a + b) == -(-token_quarters(a + b) // 4)
