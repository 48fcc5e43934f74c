"""brain.lcm.ids: generated message ids and the public ids readers show."""

from __future__ import annotations

import pytest

from brain import InvalidInput
from brain.lcm.ids import generated_row_id


def test_a_generated_id_past_the_rowid_range_is_invalid_input_whatever_its_length() -> None:
    assert generated_row_id("msg_9223372036854775807", "id") == 2**63 - 1
    assert generated_row_id("msg_007", "id") == 7
    assert generated_row_id("m7", "id") is None
    for big in ("msg_9223372036854775808", "msg_" + "9" * 5_000):  # int() refuses 4,300+ digits
        with pytest.raises(InvalidInput) as err:
            generated_row_id(big, "ids[2]")
        assert err.value.field == "ids[2]"
