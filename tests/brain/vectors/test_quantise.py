"""int8 vectors with per-row scales (brain.vectors.quantise)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.store.migrations.vectors_int8 import quantised
from brain.vectors.quantise import decode, decode_rows, encode, scores


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
