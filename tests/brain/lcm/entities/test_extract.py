"""brain.lcm.entities.extract: names, identifiers, quantities and dates, deterministically."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.lcm.entities.extract import KINDS, MAX_TEXT, entity_key, extract


def _pairs(text: str) -> set[tuple[str, str]]:
    return {(m.kind, m.key) for m in extract(text)}


def test_names_are_found_without_the_words_that_open_a_sentence() -> None:
    found = _pairs("Hey Caroline! Thanks, I met Melanie Smith at the Museum of Modern Art.")
    assert ("name", "caroline") in found
    assert ("name", "melanie smith") in found
    assert ("name", "museum of modern art") in found
    assert not {k for kind, k in found if k in {"hey", "thanks", "i"}}


def test_identifiers_of_technical_talk_have_their_own_kinds() -> None:
    text = (
        "Run `pip install -U regex`, then open https://example.com/docs/a. ENOENT in "
        "/usr/lib/python3.11/site.py; TypeError again; upgraded to v2.4.1; set max_tokens."
    )
    found = _pairs(text)
    assert ("code", "pip install -u regex") in found
    assert ("url", "https://example.com/docs/a") in found  # the full stop is not part of it
    assert ("error", "enoent") in found
    assert ("error", "typeerror") in found
    assert ("path", "/usr/lib/python3.11/site.py") in found
    assert ("version", "v2.4.1") in found
    assert ("identifier", "max_tokens") in found


def test_a_possessive_names_the_same_entity_as_the_bare_name() -> None:
    found = _pairs("Caroline\u2019s dog met John's cat; John said the Smiths' house is far.")
    assert {("name", "caroline"), ("name", "john"), ("name", "smiths")} <= found
    assert not {k for kind, k in found if kind == "name" and k.endswith(("'s", "\u2019s", "'"))}


def test_quantities_and_dates_are_found_whole() -> None:
    found = _pairs("On 8 May 2023 I ran 5 km in 25 minutes, and paid $30 on May 7, 2023.")
    assert {("date", "8 may 2023"), ("date", "may 7, 2023")} <= found
    assert {("quantity", "5 km"), ("quantity", "25 minutes"), ("quantity", "$30")} <= found


def test_a_character_belongs_to_one_mention_at_most() -> None:
    mentions = extract("see https://example.com/a/b/c.py and v1.2.3 at 10 ms")
    spans = sorted((m.start, m.end) for m in mentions)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert [m.kind for m in mentions] == ["url", "version", "quantity"]


def test_mentions_of_one_entity_share_a_key_whatever_the_case_and_spacing() -> None:
    assert entity_key("New   York") == entity_key("new york") == "new york"
    assert ("name", "new york") in _pairs("They moved to New York last year.")


def test_only_the_head_of_a_huge_text_is_read() -> None:
    text = "x " * MAX_TEXT + "Caroline"
    assert extract(text) == []


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_extraction_never_raises_and_spans_lie_within_the_text(text: str) -> None:
    for m in extract(text):
        assert 0 <= m.start < m.end <= len(text)
        assert text[m.start : m.end] == m.text
        assert m.kind in KINDS
        assert m.key
        assert m.key == entity_key(m.text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "Caroline",
                "went",
                "to",
                "/tmp/a/b",
                "v1.2.3",
                "5 km",
                "`ls -la`",
                "8 May 2023",
                "https://x.io/y",
                "ENOENT",
                "foo_bar",
                ",",
                ".",
                "\n",
                "The",
                "New York",
                "$3",
            ]
        )
    ).map(" ".join)
)
def test_extraction_is_deterministic_on_mixed_text(text: str) -> None:
    assert extract(text) == extract(text)
    for m in extract(text):
        assert text[m.start : m.end] == m.text


def test_the_protocol_offers_exactly_the_kinds_the_index_records() -> None:
    from protocol.methods import ENTITY_KINDS

    assert ENTITY_KINDS == KINDS
