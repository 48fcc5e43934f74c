"""brain.lcm.facts.scoring: what one clause is worth, and how repeats and topics reweigh it."""

from __future__ import annotations

import pytest

from brain.lcm.facts.scoring import Clause, Scorer, discount_repeats, favour_topics


def _clause(text: str, source: int = 0) -> Clause:
    clause = Scorer(condensed=False).clause(0, source, text, None, "Ann", 0.0)
    assert clause is not None
    return clause


def test_a_possessive_or_contraction_is_its_word_not_a_number() -> None:
    facts = _clause("We've got my daughter's bike and they're fixing it").facts
    assert not [k for k in facts if k.startswith("number:")]
    assert "w:daughter" in facts


def test_a_version_or_date_is_one_fact_not_its_numbers_again() -> None:
    facts = _clause("Upgraded the runner to Python 3.12.4 at db-staging-04").facts
    assert "version:3.12.4" in facts
    assert not {"number:3", "number:12", "number:4"} & set(facts)


def test_a_clause_every_message_repeats_shares_its_weight_among_them() -> None:
    banner = "Context: cwd /srv/app, branch main, Python 3.12.4"
    clauses = [_clause(banner, source=i) for i in range(5)] + [_clause("Key in vault/ci", 5)]
    before = [dict(c.facts) for c in clauses]
    discount_repeats(clauses)
    assert [c.share for c in clauses] == [pytest.approx(1 / 5)] * 5 + [1.0]
    assert [c.facts for c in clauses] == before  # what it says is unchanged
    # Said in two messages is no boilerplate yet.
    pair = [_clause(banner, source=0), _clause(banner, source=1)]
    discount_repeats(pair)
    assert [c.share for c in pair] == [1.0, 1.0]


def test_a_fact_said_in_several_messages_weighs_more_than_one_said_once() -> None:
    clauses = [
        _clause("Biscuit the beagle chewed the sofa", 0),
        _clause("Biscuit slept all afternoon", 1),
        _clause("Biscuit met a poodle at the park", 2),
        _clause("Zenith gallery reopened downtown", 3),
    ]
    once = clauses[0].facts["w:biscuit"]
    assert once == clauses[3].facts["w:zenith"]  # equally uncommon words
    favour_topics(clauses)
    assert clauses[0].facts["w:biscuit"] > once
    assert clauses[3].facts["w:zenith"] == once
