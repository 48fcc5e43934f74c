"""brain.lcm.render.cost: what a turn costs in a budget."""

from __future__ import annotations

import orjson

from brain.lcm.render import (
    Block,
    turn_tokens,
)
from brain.tokens import BLOCK_OVERHEAD, IMAGE_TOKENS, estimate_tokens, message_cost
from tests.brain.lcm.render.builders import (
    _call,
    _result,
    _text,
    _turn,
)

# -- turn_tokens ------------------------------------------------------------------------


def test_a_one_block_text_turn_costs_what_the_stored_message_costs() -> None:
    text = "a fairly ordinary sentence of text"
    assert turn_tokens(_turn("user", _text(text))) == message_cost(estimate_tokens(text))


def test_each_extra_block_adds_the_block_overhead() -> None:
    one = turn_tokens(_turn("user", _text("abcd")))
    three = turn_tokens(_turn("user", _text("abcd"), _text("abcd"), _text("abcd")))
    assert three == one + 2 * (1 + BLOCK_OVERHEAD)


def test_images_cost_a_flat_figure() -> None:
    image = Block("image", "[image]", data={"type": "image_url", "image_url": {"url": "u" * 9000}})
    assert turn_tokens(_turn("user", image)) == message_cost(IMAGE_TOKENS)


def test_a_block_of_no_known_type_costs_its_placeholder_and_a_server_block_its_json() -> None:
    other = Block("other", "[future_thing]", data={"type": "future_thing", "x": "y" * 100})
    assert turn_tokens(_turn("user", other)) == message_cost(estimate_tokens("[future_thing]"))
    # Anthropic output replays a server tool's result whole (encrypted content and all).
    result = {"type": "web_search_tool_result", "tool_use_id": "s1", "content": "E" * 4_000}
    served = turn_tokens(
        _turn("assistant", Block("other", "[web_search_tool_result]", data=result))
    )
    assert served >= estimate_tokens(orjson.dumps(result).decode())


def test_calls_and_results_cost_their_ids_names_and_text() -> None:
    call = _call("c1", "read", '{"path": "a"}')
    expected = estimate_tokens("c1") + estimate_tokens("read") + estimate_tokens('{"path": "a"}')
    assert turn_tokens(_turn("assistant", call)) == message_cost(expected)
    result = _result("c1", "hello world")
    expected = estimate_tokens("c1") + estimate_tokens("hello world")
    assert turn_tokens(_turn("tool", result)) == message_cost(expected)
