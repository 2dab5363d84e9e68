"""parse_request: every OVMS validation rule, with the message and the param it reports.

Each refused request is a minimal valid request plus one bad field, so that the rule under test is
the one that fires. Accepted requests check what the validated GenerationRequest holds.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.llm.request import Endpoint, GenerationRequest, ImageInput, Limits
from servables.openai.protocol import MAX_STOP_STRINGS, UINT32_MAX, parse_request

NO_LIMITS = Limits()
MESSAGES = [{"role": "user", "content": "hi"}]


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "messages": MESSAGES, **fields}


def completion(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": "hi", **fields}


def body_for(endpoint: Endpoint, **fields: Any) -> dict[str, Any]:
    return chat(**fields) if endpoint == "chat" else completion(**fields)


def parse(body: Any, endpoint: Endpoint = "chat", limits: Limits = NO_LIMITS) -> GenerationRequest:
    return parse_request(body, endpoint, limits)


def refused(body: Any, endpoint: Endpoint = "chat", limits: Limits = NO_LIMITS) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        parse_request(body, endpoint, limits)
    return info.value


def assert_refused(
    body: Any,
    message: str,
    param: str | None,
    endpoint: Endpoint = "chat",
    limits: Limits = NO_LIMITS,
) -> None:
    error = refused(body, endpoint, limits)
    assert error.message == message
    assert str(error) == message
    assert error.param == param


ENDPOINTS: list[Endpoint] = ["chat", "completions"]


# ------------------------------------------------------------------------ envelope: model, stream


@pytest.mark.parametrize("body", [[], "text", 3, None])
def test_body_must_be_an_object(body: Any) -> None:
    assert_refused(body, "JSON body must be an object", None)


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_model_missing(endpoint: Endpoint) -> None:
    body = body_for(endpoint)
    del body["model"]
    assert_refused(body, "model missing in request", "model", endpoint)
    assert_refused({**body, "model": None}, "model missing in request", "model", endpoint)


@pytest.mark.parametrize("model", [1, True, ["m"], {"name": "m"}])
def test_model_not_a_string(model: Any) -> None:
    assert_refused(chat(model=model), "model is not a string", "model")


def test_minimal_chat_request() -> None:
    request = parse(chat())
    assert request.endpoint == "chat"
    assert request.model == "m"
    assert request.stream is False
    assert request.include_usage is False
    assert request.messages == [{"role": "user", "content": "hi"}]
    assert request.prompt is None
    assert request.tools is None
    assert request.chat_template_kwargs == {}
    assert request.has_images is False
    assert request.ignored_fields == []
    sampling = request.sampling
    assert sampling.max_tokens is None
    assert sampling.temperature is None
    assert sampling.stop == []
    assert sampling.n == 1
    assert sampling.best_of is None
    assert sampling.logprobs is False
    assert sampling.top_logprobs == 0
    assert sampling.skip_special_tokens is True
    assert sampling.include_stop_str_in_output is False
    assert sampling.ignore_eos is False


def test_minimal_completion_request() -> None:
    request = parse(completion(), "completions")
    assert request.endpoint == "completions"
    assert request.prompt == "hi"
    assert request.messages == []
    assert request.echo is False


@pytest.mark.parametrize("stream", [1, 0, "true", [], {}])
def test_stream_not_bool(stream: Any) -> None:
    assert_refused(chat(stream=stream), "Stream is not bool", "stream")


@pytest.mark.parametrize(("stream", "expected"), [(True, True), (False, False), (None, False)])
def test_stream_values(stream: Any, expected: bool) -> None:
    assert parse(chat(stream=stream)).stream is expected


# ---------------------------------------------------------------------------------- stream_options


@pytest.mark.parametrize("stream", [None, False])
def test_stream_options_need_stream(stream: bool | None) -> None:
    body = chat(stream_options={"include_usage": True})
    if stream is not None:
        body["stream"] = stream
    assert_refused(body, "stream_options provided, but stream not set to true", "stream_options")


@pytest.mark.parametrize("options", [True, "include_usage", ["include_usage"], 1])
def test_stream_options_not_an_object(options: Any) -> None:
    assert_refused(
        chat(stream=True, stream_options=options),
        "stream_options is not an object",
        "stream_options",
    )


def test_stream_options_unknown_property() -> None:
    assert_refused(
        chat(stream=True, stream_options={"include_usage": True, "other": 1}),
        "Found unexpected stream options. Properties accepted in stream_options: include_usage",
        "stream_options",
    )


@pytest.mark.parametrize("value", [1, "true", None, []])
def test_stream_options_include_usage_not_bool(value: Any) -> None:
    assert_refused(
        chat(stream=True, stream_options={"include_usage": value}),
        "stream_options.include_usage is not a boolean",
        "stream_options.include_usage",
    )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"include_usage": True}, True),
        ({"include_usage": False}, False),
        ({}, False),
        ({"continuous_usage_stats": True}, False),
        ({"include_usage": True, "continuous_usage_stats": False}, True),
    ],
)
def test_stream_options_include_usage(options: dict[str, Any], expected: bool) -> None:
    assert parse(chat(stream=True, stream_options=options)).include_usage is expected


def test_stream_options_null_is_absent() -> None:
    assert parse(chat(stream_options=None)).include_usage is False


# ---------------------------------------------------------------------------------------- messages


def test_messages_missing() -> None:
    assert_refused({"model": "m"}, "Messages missing in request", "messages")
    assert_refused({"model": "m", "messages": None}, "Messages missing in request", "messages")


@pytest.mark.parametrize("messages", ["hi", {"role": "user"}, 3])
def test_messages_not_an_array(messages: Any) -> None:
    assert_refused(chat(messages=messages), "Messages are not an array", "messages")


def test_messages_empty() -> None:
    assert_refused(chat(messages=[]), "Messages array cannot be empty", "messages")


def test_message_not_an_object() -> None:
    messages = [{"role": "user", "content": "a"}, "b"]
    assert_refused(chat(messages=messages), "Message is not a JSON object", "messages[1]")


def test_message_without_role() -> None:
    messages = [{"role": "user", "content": "a"}, {"content": "b"}]
    assert_refused(chat(messages=messages), "Every message must have 'role' field", "messages[1]")


@pytest.mark.parametrize("role", [1, ["user"], True])
def test_message_role_not_a_string(role: Any) -> None:
    assert_refused(
        chat(messages=[{"role": role, "content": "a"}]), "role is not a string", "messages[0].role"
    )


@pytest.mark.parametrize("content", [1, True, {"type": "text", "text": "a"}])
def test_message_content_wrong_type(content: Any) -> None:
    assert_refused(
        chat(messages=[{"role": "user", "content": content}]),
        "Invalid message structure - content should be a string or an array",
        "messages[0].content",
    )


def test_message_content_null_becomes_empty_text() -> None:
    request = parse(chat(messages=[{"role": "assistant", "content": None}, *MESSAGES]))
    assert request.messages[0] == {"role": "assistant", "content": ""}
    request = parse(chat(messages=[{"role": "assistant"}]))
    assert request.messages[0] == {"role": "assistant", "content": ""}


def test_message_extra_keys_are_kept() -> None:
    message = {"role": "tool", "content": "42", "tool_call_id": "call_1", "name": "calc"}
    assert parse(chat(messages=[message])).messages == [message]


def test_content_parts_are_joined() -> None:
    parts = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    request = parse(chat(messages=[{"role": "user", "content": parts}]))
    assert request.messages == [{"role": "user", "content": "Hello, world"}]
    assert request.has_images is False


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def test_image_url_part_becomes_a_numbered_tag() -> None:
    parts = [{"type": "text", "text": "What is this?"}, image("data:image/png;base64,AAAA")]
    messages = [{"role": "user", "content": "plain"}, {"role": "user", "content": parts}]
    request = parse(chat(messages=messages))
    assert request.has_images is True
    assert request.messages[1]["content"] == "What is this?\n<ov_genai_image_0>"
    assert request.images == [
        ImageInput("data:image/png;base64,AAAA", "messages[1].content[1].image_url.url")
    ]


def test_images_are_numbered_across_messages_in_order() -> None:
    messages = [
        {
            "role": "user",
            "content": [image("a.png"), image("b.png"), {"type": "text", "text": "?"}],
        },
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": [image("c.png")]},
    ]
    request = parse(chat(messages=messages))
    assert [m["content"] for m in request.messages] == [
        "<ov_genai_image_0>\n<ov_genai_image_1>\n?",
        "two",
        "<ov_genai_image_2>",
    ]
    assert [i.url for i in request.images] == ["a.png", "b.png", "c.png"]
    assert request.images[2].param == "messages[2].content[0].image_url.url"


@pytest.mark.parametrize("image_url", [None, {}, {"url": ""}, {"url": 5}, "data:image/png"])
def test_image_url_part_without_url(image_url: Any) -> None:
    assert_refused(
        chat(
            messages=[{"role": "user", "content": [{"type": "image_url", "image_url": image_url}]}]
        ),
        "Invalid message structure - image_url part in message 0 has no url string",
        "messages[0].content[0].image_url",
    )


def test_content_part_not_an_object() -> None:
    messages = [MESSAGES[0], {"role": "user", "content": ["text"]}]
    assert_refused(
        chat(messages=messages),
        "Invalid message structure - content part in message 1 is not an object",
        "messages[1].content",
    )


@pytest.mark.parametrize("part", [{"type": "text"}, {"type": "text", "text": 5}])
def test_text_part_without_text(part: dict[str, Any]) -> None:
    assert_refused(
        chat(messages=[{"role": "user", "content": [part]}]),
        "Invalid message structure - text part in message 0 has no text string",
        "messages[0].content",
    )


@pytest.mark.parametrize(("part", "shown"), [({"text": "a"}, "None"), ({"type": 3}, "3")])
def test_unsupported_content_part(part: dict[str, Any], shown: str) -> None:
    assert_refused(
        chat(messages=[{"role": "user", "content": [part]}]),
        f"Unsupported content type: {shown}",
        "messages[0].content",
    )


def test_audio_needs_a_graph_with_speech_nodes() -> None:
    """A plain LLM graph neither hears input_audio nor speaks: each says where to look."""
    heard = refused(chat(messages=[{"role": "user", "content": [{"type": "input_audio"}]}]))
    assert "input_audio parts need a graph that transcribes them" in heard.message
    assert heard.param == "messages[0].content[0]"
    spoken = refused(chat(modalities=["text", "audio"], audio={"voice": "a", "format": "wav"}))
    assert "a spoken answer needs a graph with a text-to-speech node" in spoken.message
    assert spoken.param == "modalities"


@pytest.mark.parametrize(
    "content",
    [
        "look <ov_genai_image_0> here",
        "<ov_genai_image>",
        [{"type": "text", "text": "a <ov_genai_image_1>"}],
        [{"type": "text", "text": "<ov_genai_"}, {"type": "text", "text": "image>"}],
    ],
)
def test_restricted_image_tag(content: Any) -> None:
    messages = [MESSAGES[0], {"role": "user", "content": content}]
    assert_refused(
        chat(messages=messages), "Message contains restricted <ov_genai_image> tag", "messages[1]"
    )


def test_tool_call_arguments_default_to_empty_object() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f"}}
    given = {"id": "c2", "type": "function", "function": {"name": "g", "arguments": '{"a":1}'}}
    messages = [
        MESSAGES[0],
        {"role": "assistant", "content": None, "tool_calls": [call, given]},
    ]
    request = parse(chat(messages=messages))
    calls = request.messages[1]["tool_calls"]
    assert calls[0]["function"] == {"name": "f", "arguments": "{}"}
    assert calls[1]["function"] == {"name": "g", "arguments": '{"a":1}'}


# ------------------------------------------------------------------------ tools, template kwargs


def test_tools_are_kept() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert parse(chat(tools=tools)).tools == tools
    assert parse(chat(tools=tools, tool_choice="auto")).tools == tools


def test_tool_choice_none_drops_tools() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert parse(chat(tools=tools, tool_choice="none")).tools is None


def test_tools_not_an_array() -> None:
    assert_refused(chat(tools={"type": "function"}), "Tools are not an array", "tools")


def test_tool_not_an_object() -> None:
    assert_refused(chat(tools=["f"]), "Tool is not a JSON object", "tools[0]")
    assert_refused(
        chat(tools=[{"type": "function"}]),
        "Function object does not contain a valid name field",
        "tools[0].function",
    )


def test_chat_template_kwargs() -> None:
    kwargs = {"enable_thinking": False}
    assert parse(chat(chat_template_kwargs=kwargs)).chat_template_kwargs == kwargs


@pytest.mark.parametrize("kwargs", [[], "x", 1])
def test_chat_template_kwargs_not_an_object(kwargs: Any) -> None:
    assert_refused(
        chat(chat_template_kwargs=kwargs),
        "chat_template_kwargs must be an object",
        "chat_template_kwargs",
    )


# -------------------------------------------------------------------------------------- max_tokens


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("value", [-1, 1.5, "10", True, [10]])
def test_max_tokens_not_unsigned(endpoint: Endpoint, value: Any) -> None:
    assert_refused(
        body_for(endpoint, max_tokens=value),
        "max_tokens is not an unsigned integer",
        "max_tokens",
        endpoint,
    )


def test_max_tokens_above_uint32() -> None:
    assert_refused(
        chat(max_tokens=UINT32_MAX + 1),
        "max_tokens value can't be greater than 4294967295",
        "max_tokens",
    )
    assert parse(chat(max_tokens=UINT32_MAX)).sampling.max_tokens == UINT32_MAX


@pytest.mark.parametrize("value", [-1, 2.0, "5", False])
def test_max_completion_tokens_not_unsigned(value: Any) -> None:
    assert_refused(
        chat(max_completion_tokens=value),
        "max_completion_tokens is not an unsigned integer",
        "max_completion_tokens",
    )


def test_max_completion_tokens_above_uint32() -> None:
    assert_refused(
        chat(max_completion_tokens=UINT32_MAX + 1),
        "max_completion_tokens value can't be greater than 4294967295",
        "max_completion_tokens",
    )


def test_max_completion_tokens_overrides_max_tokens() -> None:
    assert parse(chat(max_tokens=5, max_completion_tokens=7)).sampling.max_tokens == 7
    assert parse(chat(max_tokens=5)).sampling.max_tokens == 5
    assert parse(chat(max_completion_tokens=7)).sampling.max_tokens == 7


def test_max_completion_tokens_is_not_a_completions_field() -> None:
    request = parse(completion(max_completion_tokens=7), "completions")
    assert request.sampling.max_tokens is None
    assert request.ignored_fields == ["max_completion_tokens"]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_max_tokens_limit_is_exclusive(endpoint: Endpoint) -> None:
    # OVMS: max_tokens must be strictly below max_tokens_limit.
    limits = Limits(max_tokens_limit=100)
    assert parse(body_for(endpoint, max_tokens=99), endpoint, limits).sampling.max_tokens == 99
    assert_refused(
        body_for(endpoint, max_tokens=100),
        "max_tokens exceeds limit provided in graph config: 100",
        "max_tokens",
        endpoint,
        limits,
    )


def test_max_completion_tokens_limit_is_inclusive() -> None:
    # OVMS: max_completion_tokens may equal max_tokens_limit.
    limits = Limits(max_tokens_limit=100)
    assert parse(chat(max_completion_tokens=100), limits=limits).sampling.max_tokens == 100
    assert_refused(
        chat(max_completion_tokens=101),
        "max_completion_tokens exceeds limit provided in graph config: 100",
        "max_completion_tokens",
        limits=limits,
    )


def test_no_max_tokens_limit_by_default() -> None:
    assert parse(chat(max_tokens=10**9)).sampling.max_tokens == 10**9


def test_zero_max_tokens_chat() -> None:
    assert_refused(chat(max_tokens=0), "max_tokens value should be greater than 0", "max_tokens")
    assert_refused(
        chat(max_completion_tokens=0),
        "max_completion_tokens value should be greater than 0",
        "max_completion_tokens",
    )


def test_zero_max_tokens_completions() -> None:
    assert_refused(
        completion(max_tokens=0),
        "max_tokens value should be greater than 0 unless echo is set",
        "max_tokens",
        "completions",
    )
    assert_refused(
        completion(max_tokens=0, echo=False),
        "max_tokens value should be greater than 0 unless echo is set",
        "max_tokens",
        "completions",
    )


def test_zero_max_tokens_with_echo_is_allowed() -> None:
    request = parse(completion(max_tokens=0, echo=True), "completions")
    assert request.sampling.max_tokens == 0
    assert request.echo is True


def test_echo_is_not_a_chat_field() -> None:
    assert parse(chat(echo=True)).ignored_fields == ["echo"]
    assert_refused(
        chat(echo=True, max_tokens=0), "max_tokens value should be greater than 0", "max_tokens"
    )


@pytest.mark.parametrize("echo", [1, "yes", []])
def test_echo_not_bool(echo: Any) -> None:
    assert_refused(
        completion(echo=echo), "echo accepts values true or false", "echo", "completions"
    )


# --------------------------------------------------------------------------- sampling parameters

NUMBER_RANGES = [
    # field, lowest accepted, highest accepted, too low, too high, message range text
    ("temperature", 0.0, 2.0, -0.01, 2.01, "(0.0, 2.0)"),
    ("top_p", 0.0, 1.0, -0.01, 1.01, "(0.0, 1.0)"),
    ("frequency_penalty", -2.0, 2.0, -2.01, 2.01, "(-2.0, 2.0)"),
    ("presence_penalty", -2.0, 2.0, -2.01, 2.01, "(-2.0, 2.0)"),
    ("min_p", 0.0, 0.999, -0.01, 1.0, " [0.0, 1.0)"),
]


@pytest.mark.parametrize(("name", "low", "high", "below", "above", "text"), NUMBER_RANGES)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_number_ranges(
    endpoint: Endpoint, name: str, low: float, high: float, below: float, above: float, text: str
) -> None:
    assert getattr(parse(body_for(endpoint, **{name: low}), endpoint).sampling, name) == low
    assert getattr(parse(body_for(endpoint, **{name: high}), endpoint).sampling, name) == high
    for bad in (below, above):
        assert_refused(
            body_for(endpoint, **{name: bad}), f"{name} out of range{text}", name, endpoint
        )


def test_temperature_message_matches_ovms() -> None:
    assert_refused(chat(temperature=3), "temperature out of range(0.0, 2.0)", "temperature")


def test_integer_numbers_become_floats() -> None:
    sampling = parse(chat(temperature=1, top_p=1, repetition_penalty=2)).sampling
    assert sampling.temperature == 1.0 and isinstance(sampling.temperature, float)
    assert isinstance(sampling.top_p, float)
    assert isinstance(sampling.repetition_penalty, float)


NUMBER_FIELDS = [
    "temperature",
    "top_p",
    "min_p",
    "repetition_penalty",
    "length_penalty",
    "frequency_penalty",
    "presence_penalty",
]


@pytest.mark.parametrize("name", NUMBER_FIELDS)
@pytest.mark.parametrize(
    "value",
    [True, False, "0.5", [0.5], float("nan"), float("inf"), float("-inf")],
    ids=["true", "false", "string", "list", "nan", "inf", "-inf"],
)
def test_numbers_reject_bools_strings_and_non_finite(name: str, value: Any) -> None:
    assert_refused(chat(**{name: value}), f"{name} is not a valid number", name)


def test_repetition_penalty() -> None:
    assert parse(chat(repetition_penalty=1.5)).sampling.repetition_penalty == 1.5
    assert parse(chat(repetition_penalty=100)).sampling.repetition_penalty == 100.0
    for bad in (0, -1.0):
        assert_refused(
            chat(repetition_penalty=bad),
            "repetition_penalty must be greater than 0",
            "repetition_penalty",
        )


def test_length_penalty_is_unbounded() -> None:
    assert parse(chat(length_penalty=-5)).sampling.length_penalty == -5.0
    assert parse(chat(length_penalty=7.5)).sampling.length_penalty == 7.5


@pytest.mark.parametrize("top_k", [-1, 1, 40, UINT32_MAX + 1])
def test_top_k_accepted(top_k: int) -> None:
    assert parse(chat(top_k=top_k)).sampling.top_k == top_k


@pytest.mark.parametrize("top_k", [0, -2, -100])
def test_top_k_out_of_range(top_k: int) -> None:
    assert_refused(
        chat(top_k=top_k), "top_k must be -1 (all tokens) or a positive integer", "top_k"
    )


@pytest.mark.parametrize("top_k", [True, 1.0, "5"])
def test_top_k_not_an_integer(top_k: Any) -> None:
    assert_refused(chat(top_k=top_k), "top_k is not an integer", "top_k")


@pytest.mark.parametrize("seed", [0, 42, UINT32_MAX])
def test_seed_accepted(seed: int) -> None:
    assert parse(chat(seed=seed)).sampling.seed == seed


@pytest.mark.parametrize("seed", [-1, UINT32_MAX + 1])
def test_seed_out_of_range(seed: int) -> None:
    assert_refused(chat(seed=seed), "seed out of range [0, 4294967295]", "seed")


@pytest.mark.parametrize("seed", [True, 1.0, "1"])
def test_seed_not_an_integer(seed: Any) -> None:
    assert_refused(chat(seed=seed), "seed is not an integer", "seed")


FLAGS = ["include_stop_str_in_output", "ignore_eos", "skip_special_tokens"]


@pytest.mark.parametrize("name", FLAGS)
@pytest.mark.parametrize("value", [1, 0, "true"])
def test_flags_not_bool(name: str, value: Any) -> None:
    assert_refused(chat(**{name: value}), f"{name} accepts values true or false", name)


def test_flags() -> None:
    sampling = parse(
        chat(include_stop_str_in_output=True, ignore_eos=True, skip_special_tokens=False)
    ).sampling
    assert sampling.include_stop_str_in_output is True
    assert sampling.ignore_eos is True
    assert sampling.skip_special_tokens is False
    sampling = parse(chat(skip_special_tokens=None, ignore_eos=None)).sampling
    assert sampling.skip_special_tokens is True
    assert sampling.ignore_eos is False


# -------------------------------------------------------------------------------------------- stop


@pytest.mark.parametrize(
    ("stop", "expected"),
    [
        ("\n", ["\n"]),
        ("", []),
        (None, []),
        ([], []),
        (["a", "b"], ["a", "b"]),
        (["a", "", "b"], ["a", "b"]),
        (["s"] * MAX_STOP_STRINGS, ["s"] * MAX_STOP_STRINGS),
    ],
)
def test_stop_accepted(stop: Any, expected: list[str]) -> None:
    assert parse(chat(stop=stop)).sampling.stop == expected


def test_stop_too_many_strings() -> None:
    assert MAX_STOP_STRINGS == 16
    assert_refused(chat(stop=["s"] * 17), "stop array must have no more than 16 strings", "stop")


@pytest.mark.parametrize("stop", [["a", 1], [None], [["a"]], [True]])
def test_stop_non_string_element(stop: list[Any]) -> None:
    assert_refused(chat(stop=stop), "stop array contains non string element", "stop")


@pytest.mark.parametrize("stop", [1, True, {"a": 1}])
def test_stop_wrong_type(stop: Any) -> None:
    assert_refused(chat(stop=stop), "stop is not a string or array of strings", "stop")


# ----------------------------------------------------------------------------------- best_of and n


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_best_of(endpoint: Endpoint) -> None:
    request = parse(body_for(endpoint, best_of=3, n=2), endpoint)
    assert request.sampling.best_of == 3
    assert request.sampling.n == 2


def test_best_of_zero() -> None:
    assert_refused(chat(best_of=0), "best_of value should be greater than 0", "best_of")


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
def test_best_of_not_unsigned(value: Any) -> None:
    assert_refused(chat(best_of=value), "best_of is not an unsigned integer", "best_of")


def test_best_of_limit_is_exclusive() -> None:
    assert parse(chat(best_of=19)).sampling.best_of == 19
    assert_refused(
        chat(best_of=20), "best_of exceeds limit provided in graph config: 20", "best_of"
    )
    limits = Limits(best_of_limit=4)
    assert parse(chat(best_of=3), limits=limits).sampling.best_of == 3
    assert_refused(
        chat(best_of=4),
        "best_of exceeds limit provided in graph config: 4",
        "best_of",
        limits=limits,
    )


def test_best_of_not_in_streaming() -> None:
    assert_refused(
        chat(best_of=2, stream=True), "best_of cannot be used in streaming mode", "best_of"
    )


def test_n_zero() -> None:
    assert_refused(chat(n=0), "n value should be greater than 0", "n")


@pytest.mark.parametrize("value", [-1, 2.0, True, "2"])
def test_n_not_unsigned(value: Any) -> None:
    assert_refused(chat(n=value), "n is not an unsigned integer", "n")


def test_n_greater_than_best_of() -> None:
    assert_refused(chat(n=3, best_of=2), "n value cannot be greater than best_of", "n")
    assert parse(chat(n=2, best_of=2)).sampling.n == 2


def test_n_limit_without_best_of() -> None:
    assert parse(chat(n=20)).sampling.n == 20
    assert_refused(chat(n=21), "n exceeds limit provided in graph config: 20", "n")
    assert_refused(
        chat(n=3),
        "n exceeds limit provided in graph config: 2",
        "n",
        limits=Limits(best_of_limit=2),
    )


def test_n_streams() -> None:
    request = parse(chat(n=3, stream=True))
    assert request.sampling.n == 3
    assert request.stream is True


# ---------------------------------------------------------------------------------------- logprobs


def test_chat_logprobs() -> None:
    sampling = parse(chat(logprobs=True, top_logprobs=5)).sampling
    assert sampling.logprobs is True
    assert sampling.top_logprobs == 5
    sampling = parse(chat(logprobs=True)).sampling
    assert (sampling.logprobs, sampling.top_logprobs) == (True, 0)
    sampling = parse(chat(logprobs=False, top_logprobs=0)).sampling
    assert (sampling.logprobs, sampling.top_logprobs) == (False, 0)


@pytest.mark.parametrize("value", [1, 0, "true"])
def test_chat_logprobs_must_be_bool(value: Any) -> None:
    assert_refused(chat(logprobs=value), "logprobs accepts values true or false", "logprobs")


@pytest.mark.parametrize("value", [True, 1.0, "3"])
def test_top_logprobs_not_an_integer(value: Any) -> None:
    assert_refused(
        chat(logprobs=True, top_logprobs=value), "top_logprobs is not an integer", "top_logprobs"
    )


@pytest.mark.parametrize("value", [-1, 21])
def test_top_logprobs_out_of_range(value: int) -> None:
    assert_refused(
        chat(logprobs=True, top_logprobs=value),
        "top_logprobs out of range [0, 20]",
        "top_logprobs",
    )
    assert parse(chat(logprobs=True, top_logprobs=20)).sampling.top_logprobs == 20


@pytest.mark.parametrize("logprobs", [None, False])
def test_top_logprobs_requires_logprobs(logprobs: bool | None) -> None:
    body = chat(top_logprobs=2)
    if logprobs is not None:
        body["logprobs"] = logprobs
    assert_refused(body, "top_logprobs requires logprobs to be set to true", "top_logprobs")


@pytest.mark.parametrize("value", [0, 1, 5])
def test_completion_logprobs(value: int) -> None:
    sampling = parse(completion(logprobs=value), "completions").sampling
    assert sampling.logprobs is True
    assert sampling.top_logprobs == value


def test_completion_logprobs_absent() -> None:
    sampling = parse(completion(logprobs=None), "completions").sampling
    assert (sampling.logprobs, sampling.top_logprobs) == (False, 0)


@pytest.mark.parametrize("value", [True, False, 1.0, "1"])
def test_completion_logprobs_must_be_integer(value: Any) -> None:
    assert_refused(
        completion(logprobs=value), "logprobs accepts integer values", "logprobs", "completions"
    )


@pytest.mark.parametrize("value", [-1, 6])
def test_completion_logprobs_out_of_range(value: int) -> None:
    assert_refused(
        completion(logprobs=value), "logprobs out of range [0, 5]", "logprobs", "completions"
    )


def test_top_logprobs_is_not_a_completions_field() -> None:
    request = parse(completion(top_logprobs=3), "completions")
    assert request.sampling.top_logprobs == 0
    assert request.ignored_fields == ["top_logprobs"]


# ------------------------------------------------------------------------------------------ prompt


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Hello", "Hello"),
        (["Hello"], "Hello"),
        ([1, 2, 3], [1, 2, 3]),
        ([[4, 5]], [4, 5]),
        ([0], [0]),
    ],
    ids=["string", "single-string-list", "token-ids", "single-token-list", "token-zero"],
)
def test_prompt_forms(prompt: Any, expected: str | list[int]) -> None:
    assert parse(completion(prompt=prompt), "completions").prompt == expected


def test_prompt_missing() -> None:
    assert_refused({"model": "m"}, "prompt is missing", "prompt", "completions")
    for empty in (None, "", [""]):
        assert_refused(completion(prompt=empty), "prompt is missing", "prompt", "completions")


@pytest.mark.parametrize("prompt", [["a", "b"], [[1], [2]], ["a", [1]]])
def test_multiple_prompts(prompt: list[Any]) -> None:
    assert_refused(
        completion(prompt=prompt),
        "only one prompt per request is supported",
        "prompt",
        "completions",
    )


@pytest.mark.parametrize(
    "prompt",
    [3, {"text": "a"}, [], [1, "a"], [True], [1.5], [[]]],
    ids=["int", "object", "empty-list", "mixed", "bool-id", "float-id", "empty-ids"],
)
def test_prompt_wrong_type(prompt: Any) -> None:
    assert_refused(completion(prompt=prompt), "prompt is not a string", "prompt", "completions")


@pytest.mark.parametrize("token", [-1, 2**31, 27753868110943904224772096])
def test_prompt_token_ids_out_of_range(token: int) -> None:
    assert_refused(
        completion(prompt=[5, token]),
        "prompt token ids must be between 0 and 2147483647",
        "prompt",
        "completions",
    )


def test_suffix_not_supported() -> None:
    assert_refused(completion(suffix="end"), "suffix is not supported", "suffix", "completions")
    assert parse(completion(suffix=""), "completions").prompt == "hi"
    assert parse(completion(suffix=None), "completions").prompt == "hi"


def test_prompt_is_not_a_chat_field() -> None:
    request = parse(chat(prompt="x"))
    assert request.prompt is None
    assert request.ignored_fields == ["prompt"]


def test_messages_are_not_a_completions_field() -> None:
    request = parse(completion(messages=MESSAGES), "completions")
    assert request.messages == []
    assert request.ignored_fields == ["messages"]


# ---------------------------------------------------------------------------------- unknown fields


def test_unknown_fields_are_reported_not_rejected() -> None:
    request = parse(chat(zeta=1, alpha={"x": [1]}, logit_bias={"1": 2}, user="u", store=False))
    assert request.ignored_fields == ["alpha", "logit_bias", "zeta"]


def test_known_but_unused_fields_are_not_reported() -> None:
    body = chat(
        user="u",
        service_tier="auto",
        store=False,
        metadata={"k": "v"},
        response_format=None,
        parallel_tool_calls=True,
    )
    assert parse(body).ignored_fields == []


def test_unknown_fields_completions() -> None:
    request = parse(completion(logit_bias={}, tools=[]), "completions")
    assert request.ignored_fields == ["logit_bias", "tools"]
