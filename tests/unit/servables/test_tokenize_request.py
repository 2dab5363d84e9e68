"""/v3/tokenize parsing: max_length and padding are bounded; the tokenizer runs off the loop."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.io.text.tokenize import TokenizeRequest
from servables.openai.tokenize import (
    MAX_LENGTH,
    MAX_PADDED_TOKENS,
    parse_tokenize_request,
    tokenize_reply,
)


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "text": "hello", **fields}


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        ({"max_length": 10**30}, "max_length", "at most 512 (the model's context)"),
        ({"max_length": 513}, "max_length", "at most 512"),
        ({"max_length": -1}, "max_length", "positive integer"),
        ({"max_length": 0}, "max_length", "positive integer"),
        ({"max_length": 1.5}, "max_length", "positive integer"),
        ({"max_length": "8"}, "max_length", "positive integer"),
        ({"max_length": True}, "max_length", "positive integer"),
        ({"pad_to_max_length": True}, "pad_to_max_length", "needs max_length"),
        ({"pad_to_max_length": 1, "max_length": 4}, "pad_to_max_length", "true or false"),
        (
            {"text": ["x"] * 4096, "max_length": 512, "pad_to_max_length": True},
            "pad_to_max_length",
            "more than",
        ),
    ],
)
def test_out_of_range_values_are_400s_naming_the_param(
    fields: dict[str, Any], param: str, message: str
) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_tokenize_request(body(**fields), context=512)
    assert raised.value.param == param
    assert message in raised.value.message


def test_the_bound_without_a_known_context() -> None:
    assert parse_tokenize_request(body(max_length=MAX_LENGTH)).max_length == MAX_LENGTH
    with pytest.raises(InvalidRequest, match=f"at most {MAX_LENGTH}"):
        parse_tokenize_request(body(max_length=MAX_LENGTH + 1), context=None)
    with pytest.raises(InvalidRequest, match=f"at most {MAX_LENGTH}"):
        parse_tokenize_request(body(max_length=MAX_LENGTH + 1), context=10**9)


def test_in_range_values_are_kept() -> None:
    request = parse_tokenize_request(
        body(text=["a", "b"], max_length=512, pad_to_max_length=True, padding_side="left"),
        context=512,
    )
    assert request.max_length == 512 and request.pad_to_max_length and request.batched
    assert MAX_PADDED_TOKENS >= 2 * 512


async def test_tokenize_reply_runs_the_tokenizer_off_the_event_loop() -> None:
    loop_thread = threading.current_thread()
    seen: list[threading.Thread] = []

    def tokenize(request: TokenizeRequest) -> list[list[int]]:
        seen.append(threading.current_thread())
        return [[1, 2, 3] for _ in request.texts]

    reply = await tokenize_reply(tokenize, body(max_length=3), 512)
    assert reply == {"tokens": [1, 2, 3]}
    assert seen and seen[0] is not loop_thread
