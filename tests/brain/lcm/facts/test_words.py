"""brain.lcm.facts.words: stems, content terms and how uncommon a word is."""

from __future__ import annotations

from brain.lcm.facts.words import rarity, stem, terms


def test_inflections_meet_at_one_stem() -> None:
    assert stem("painting") == stem("painted") == stem("paints") == "paint"
    assert stem("running") == "run"
    assert stem("stories") == "story"
    assert stem("caroline's") == "caroline"
    assert stem("class") == "class"
    assert stem("2023") == "2023"


def test_terms_drop_function_words_and_reactions() -> None:
    assert terms("Wow, I love that! My kids painted a sunrise in 2022.") == [
        "kid",
        "paint",
        "sunrise",
        "2022",
    ]


def test_uncommon_words_are_rarer_than_common_ones() -> None:
    assert rarity("time") < 0.05
    assert 0.0 < rarity("pottery") < 1.0
    assert rarity("margarine") == 1.0
    assert rarity("time") < rarity("jersey") < rarity("pottery") < rarity("margarine")


def test_a_run_of_cjk_characters_is_a_term() -> None:
    assert terms("データベースの移行が失敗しました。") == ["データベースの移行が失敗しました"]


def test_a_possessive_or_contraction_is_its_word() -> None:
    assert terms("We've got my daughter's bike; they're fixing it, isn't it?") == [
        "daughter",
        "bike",
        "fix",
    ]
