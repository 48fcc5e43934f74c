"""int8 vectors with per-row scales (brain.vectors.quantise)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.store.migrations.vectors_int8 import quantised
from brain.vectors.quantise import decode, decode_rows, encode, quantise, scores, scores_runs


def _unit_rows(seed: int, n: int, dim: int) -> npt.NDArray[np.float32]:
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def test_a_stored_vector_takes_a_quarter_of_float32_plus_its_scale() -> None:
    blobs = encode(_unit_rows(0, 3, 256))
    assert [len(b) for b in blobs] == [256 + 4] * 3


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), dim=st.integers(2, 300))
def test_quantised_dot_products_stay_within_a_hundredth_of_float32(seed: int, dim: int) -> None:
    rows = _unit_rows(seed, 50, dim)
    query = _unit_rows(seed + 1, 1, dim)[0]
    codes, scales = decode_rows(encode(rows), dim)
    np.testing.assert_allclose(scores(codes, scales, query), rows @ query, atol=0.01)


def test_a_float32_blob_from_before_v19_reads_as_its_quantised_twin() -> None:
    rows = _unit_rows(3, 4, 16)
    legacy = [row.tobytes() for row in rows]
    codes, scales = decode_rows(legacy, 16)
    want_codes, want_scales = decode_rows(encode(rows), 16)
    assert (codes == want_codes).all()
    np.testing.assert_array_equal(scales, want_scales)
    assert [quantised(blob, 16) for blob in legacy] == encode(rows)  # the v19 migration's
    np.testing.assert_allclose(decode(legacy[0], 16), rows[0], atol=0.01)


def test_a_zero_vector_stays_zero_and_a_blob_of_another_length_is_refused() -> None:
    codes, scales = decode_rows(encode(np.zeros((1, 8), np.float32)), 8)
    assert not codes.any()
    assert scales.tolist() == [0.0]
    with pytest.raises(ValueError, match="7 bytes"):
        decode(b"\x00" * 7, 8)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    cuts=st.lists(st.integers(0, 3_000), min_size=2, max_size=12),
)
def test_runs_scored_in_one_call_score_exactly_as_each_run_alone(
    seed: int, cuts: list[int]
) -> None:
    # An IVF probe scores its lists (runs of a file in list order) in one call.
    codes, scales = quantise(_unit_rows(seed, 3_000, 64))
    query = _unit_rows(seed + 1, 1, 64)[0]
    bounds = sorted(cuts)
    starts, ends = bounds[0::2], bounds[1::2]
    starts = starts[: len(ends)]  # runs in row order, some empty, none overlapping
    alone = [scores(codes[s:e], scales[s:e], query) for s, e in zip(starts, ends, strict=True)]
    together = scores_runs(codes, scales, starts, ends, query)
    want = np.concatenate(alone) if alone else np.zeros(0, np.float32)
    assert together.dtype == np.float32
    assert together.tolist() == want.tolist()
