"""Agents end to end on SmolLM2: structured output, tools, parsers, Responses, tokenize, LangChain.

Most tests use the session's main server. Constrained outputs are compared with the engine run
directly under the same StructuredOutputConfig (the `golden` fixture), which shows the constraint
reached the engine, and validated against their schema with jsonschema. Tool calls made under a
forced `tool_choice` are validated against the tool's parameters. One module server runs with
`--tool_parser hermes3 --reasoning_parser qwen3 --enable_tool_guided_generation`: a regex makes
the small model write Hermes markup, which the parsers must turn into tool calls and reasoning.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.e2e.conftest import Golden, Launch, Server

jsonschema: Any = importlib.import_module("jsonschema")

COMPACT = {"role": "system", "content": "Answer in one line of compact JSON."}
NESTED = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}, "zip": {"type": "integer"}},
            "required": ["city", "zip"],
        },
    },
    "required": ["name", "address"],
}
ENUM = {
    "type": "object",
    "properties": {"color": {"enum": ["red", "green", "blue"]}, "sure": {"type": "boolean"}},
    "required": ["color", "sure"],
}
ARRAY = {
    "type": "object",
    "properties": {
        "fruits": {
            "type": "array",
            "items": {"type": "string", "maxLength": 12},
            "minItems": 1,
            "maxItems": 3,
        }
    },
    "required": ["fruits"],
}
SCHEMA_CASES = [
    ("nested", NESTED, "Give me an example."),
    ("enum", ENUM, "Give me an example."),
    ("array", ARRAY, "Name some fruits."),
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
TOOLS = [WEATHER, ADD]
ASK_WEATHER = [{"role": "user", "content": "What is the weather in Paris?"}]


def schema_of(name: str) -> dict[str, Any]:
    tool = next(t for t in TOOLS if t["function"]["name"] == name)
    parameters: dict[str, Any] = tool["function"]["parameters"]
    return parameters


def assert_valid_call(name: str, arguments: str) -> None:
    jsonschema.validate(json.loads(arguments), schema_of(name))


# ------------------------------------------------------------------------ structured output


@pytest.mark.parametrize(("name", "schema", "question"), SCHEMA_CASES, ids=lambda c: str(c)[:6])
def test_json_schema_output_is_the_engines_and_validates(
    client: openai.OpenAI, golden: Golden, name: str, schema: dict[str, Any], question: str
) -> None:
    messages = [COMPACT, {"role": "user", "content": question}]
    reply = client.chat.completions.create(
        model="smollm2",
        messages=messages,  # type: ignore[arg-type]
        max_tokens=80,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": True},
        },
    )
    text = reply.choices[0].message.content
    assert text is not None
    jsonschema.validate(json.loads(text), schema)
    expected = golden.chat(messages, 80, {"json_schema": json.dumps(schema)})
    assert text == expected.text
    assert reply.choices[0].finish_reason == "stop"


def test_json_schema_streaming_matches_unary(client: openai.OpenAI, golden: Golden) -> None:
    messages = [COMPACT, {"role": "user", "content": "Give me an example."}]
    stream = client.chat.completions.create(
        model="smollm2",
        messages=messages,  # type: ignore[arg-type]
        max_tokens=80,
        stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": NESTED}},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    jsonschema.validate(json.loads(text), NESTED)
    assert text == golden.chat(messages, 80, {"json_schema": json.dumps(NESTED)}).text


def test_json_object_and_vllm_forms(client: openai.OpenAI, golden: Golden) -> None:
    messages: Any = [COMPACT, {"role": "user", "content": "Give me an example."}]
    reply = client.chat.completions.create(
        model="smollm2", messages=messages, max_tokens=80, response_format={"type": "json_object"}
    )
    text = reply.choices[0].message.content or ""
    # The engine under the same grammar writes the same text; whether the small model closes its
    # object within 80 tokens depends on the CPU's kernels (one machine's did not), so the text
    # parses as JSON only when it stopped by itself.
    any_object = json.dumps({"type": "object", "additionalProperties": True})
    assert text == golden.chat(messages, 80, {"json_schema": any_object}).text
    assert text.startswith("{")
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    else:
        assert reply.choices[0].finish_reason == "length"
    regex = client.chat.completions.create(
        model="smollm2",
        messages=ASK_WEATHER,  # type: ignore[arg-type]
        max_tokens=12,
        extra_body={"guided_regex": "[0-9]{2} degrees (sunny|rainy)"},
    )
    assert re.fullmatch("[0-9]{2} degrees (sunny|rainy)", regex.choices[0].message.content or "")
    choices = ["sunny", "rainy", "it depends"]
    choice = client.chat.completions.create(
        model="smollm2",
        messages=ASK_WEATHER,  # type: ignore[arg-type]
        max_tokens=12,
        extra_body={"structured_outputs": {"choice": choices}},
    )
    assert choice.choices[0].message.content in choices
    completion = client.completions.create(
        model="smollm2", prompt="The answer is", max_tokens=5, extra_body={"guided_choice": choices}
    )
    assert completion.choices[0].text in choices


# ------------------------------------------------------------------------------------- tools


def test_named_tool_choice_returns_a_valid_call(client: openai.OpenAI) -> None:
    forced: Any = {"type": "function", "function": {"name": "get_weather"}}
    reply = client.chat.completions.create(
        model="smollm2",
        messages=ASK_WEATHER,
        max_tokens=60,
        tools=TOOLS,
        tool_choice=forced,  # type: ignore[arg-type]
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert_valid_call("get_weather", call.function.arguments)  # type: ignore[union-attr]
    stream = client.chat.completions.create(
        model="smollm2",
        messages=ASK_WEATHER,  # type: ignore[arg-type]
        max_tokens=60,
        tools=TOOLS,  # type: ignore[arg-type]
        tool_choice=forced,
        stream=True,
    )
    pieces = [c.choices[0] for c in stream if c.choices]
    deltas = [d for p in pieces for d in p.delta.tool_calls or []]
    assert deltas[0].id and deltas[0].function and deltas[0].function.name == "get_weather"
    assert all(d.id is None and d.index == 0 for d in deltas[1:])
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert arguments == call.function.arguments  # type: ignore[union-attr]
    assert pieces[-1].finish_reason == "tool_calls"
    assert not any(p.delta.content for p in pieces)


def test_required_tool_choice_and_parallel_calls(client: openai.OpenAI) -> None:
    for parallel in (True, False):
        reply = client.chat.completions.create(
            model="smollm2",
            messages=ASK_WEATHER,  # type: ignore[arg-type]
            max_tokens=80,
            tools=TOOLS,  # type: ignore[arg-type]
            tool_choice="required",
            parallel_tool_calls=parallel,
        )
        calls = reply.choices[0].message.tool_calls or []
        assert calls and reply.choices[0].finish_reason == "tool_calls"
        if not parallel:
            assert len(calls) == 1
        for call in calls:
            assert_valid_call(call.function.name, call.function.arguments)  # type: ignore[union-attr]


def test_tool_choice_none_and_a_conversation_with_tool_results(
    client: openai.OpenAI, golden: Golden
) -> None:
    reply = client.chat.completions.create(
        model="smollm2",
        messages=ASK_WEATHER,
        max_tokens=20,
        tools=TOOLS,
        tool_choice="none",  # type: ignore[arg-type]
    )
    assert reply.choices[0].message.tool_calls is None
    assert reply.choices[0].message.content == golden.chat(ASK_WEATHER, 20).text
    arguments = json.dumps({"city": "Paris", "unit": "celsius"})
    history: Any = [
        *ASK_WEATHER,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "22 degrees and sunny"},
    ]
    answer = client.chat.completions.create(
        model="smollm2",
        messages=history,
        max_tokens=20,
        tools=TOOLS,  # type: ignore[arg-type]
    )
    assert answer.choices[0].message.content
    assert answer.usage is not None and reply.usage is not None
    assert answer.usage.prompt_tokens > reply.usage.prompt_tokens  # the tool result was read


# -------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}},
                }
            },
            "response_format.json_schema.schema",
        ),
        ({"guided_regex": "(a)\\1"}, "guided_regex"),
        ({"guided_grammar": 'rule ::= "x"'}, "guided_grammar"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}}, None),
        ({"tools": {"not": "an array"}}, "tools"),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {"name": "f", "parameters": {"type": "object", "not": {}}},
                    }
                ],
                "tool_choice": "required",
            },
            None,
        ),
    ],
)
def test_bad_grammars_and_tools_are_400s_and_serving_goes_on(
    server: Server, golden: Golden, fields: dict[str, Any], param: str | None
) -> None:
    body = {"model": "smollm2", "messages": ASK_WEATHER, "max_tokens": 5, **fields}
    with server.http() as http:
        response = http.post("/v3/chat/completions", json=body)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error"
        if param is not None:
            assert error["param"] == param
        else:
            assert error["param"].startswith(("tool_choice", "tools"))
        ok = http.post("/v3/chat/completions", json={**body, **{k: None for k in fields}})
    assert ok.status_code == 200
    assert ok.json()["choices"][0]["message"]["content"] == golden.chat(ASK_WEATHER, 5).text


# ------------------------------------------------------------------------ Responses, tokenize


def test_responses_unary_and_streaming(client: openai.OpenAI, golden: Golden) -> None:
    instructions = "Answer briefly."
    question = "What is the capital of France?"
    expected = golden.chat(
        [{"role": "system", "content": instructions}, {"role": "user", "content": question}], 100
    )
    response = client.responses.create(
        model="smollm2", instructions=instructions, input=question, max_output_tokens=100
    )
    assert response.status == "completed" and response.output_text == expected.text
    assert response.usage is not None
    assert response.usage.input_tokens == expected.prompt_tokens
    assert response.usage.output_tokens == expected.completion_tokens
    with client.responses.stream(
        model="smollm2", instructions=instructions, input=question, max_output_tokens=100
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.output_text == expected.text
    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    cut = client.responses.create(model="smollm2", input=question, max_output_tokens=3)
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert cut.incomplete_details.reason == "max_output_tokens"


def test_responses_stream_starts_at_once_and_ends_with_its_last_event(
    client: openai.OpenAI, server: Server
) -> None:
    body = {"model": "smollm2", "input": "Count to twenty.", "max_output_tokens": 40}
    stream = client.responses.create(**body, stream=True)  # type: ignore[call-overload]
    kinds = [event.type for event in stream]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    with (
        server.http() as http,
        http.stream("POST", "/v3/responses", json={**body, "stream": True}) as response,
    ):
        assert response.status_code == 200
        chunks = list(response.iter_raw())
    raw = b"".join(chunks).decode()
    assert "[DONE]" not in raw  # the Responses stream has no [DONE] after its last event
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert json.loads(events[-1])["type"] in ("response.completed", "response.incomplete")
    # created and in_progress are written when the request is taken, before any engine step:
    # on their own, ahead of the first output
    first = chunks[0].decode()
    assert "response.created" in first and "response.in_progress" in first
    assert "response.output_item.added" not in first


def test_responses_function_tool(client: openai.OpenAI) -> None:
    tools: Any = [{"type": "function", **WEATHER["function"]}]
    response = client.responses.create(
        model="smollm2",
        input="What is the weather in Paris?",
        tools=tools,
        tool_choice="required",
        max_output_tokens=60,
    )
    calls = [item for item in response.output if item.type == "function_call"]
    assert calls and all(call.name == "get_weather" for call in calls)
    for call in calls:
        assert_valid_call(call.name, call.arguments)
    stream = client.responses.create(
        model="smollm2",
        input="What is the weather in Paris?",
        tools=tools,
        tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=60,
        stream=True,
    )
    events = list(stream)
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert deltas == done.arguments
    assert_valid_call("get_weather", done.arguments)
    answer = client.responses.create(
        model="smollm2",
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "22 degrees and sunny"},
        ],
        tools=tools,
        max_output_tokens=20,
    )
    assert answer.output_text


def test_responses_refuses_stored_state(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="smollm2", input="hi", previous_response_id="resp_x")
    assert "previous_response_id" in str(info.value)


def test_tokenize_matches_the_engines_tokenizer(server: Server, golden: Golden) -> None:
    texts = ["Hello world", "What is the capital of France?"]
    with server.http() as http:
        single = http.post("/v3/tokenize", json={"model": "smollm2", "text": texts[0]})
        many = http.post("/v1/tokenize", json={"model": "smollm2", "text": texts})
        padded = http.post(
            "/v3/tokenize",
            json={
                "model": "smollm2",
                "text": texts[0],
                "max_length": 6,
                "pad_to_max_length": True,
                "padding_side": "left",
            },
        )
        bad = http.post("/v3/tokenize", json={"model": "smollm2", "text": 5})
        # vLLM's and OVMS's tokenize never stream: "stream" changes nothing.
        streamed = http.post(
            "/v3/tokenize", json={"model": "smollm2", "text": texts[0], "stream": True}
        )
    assert single.json() == {"tokens": golden.encode(texts[0], True)}
    assert streamed.headers["content-type"].startswith("application/json")
    assert streamed.json() == single.json()
    assert many.json() == {"tokens": [golden.encode(text, True) for text in texts]}
    ids = golden.encode(texts[0], True)
    pad = int(golden.tokenizer.get_pad_token_id())
    assert padded.json() == {"tokens": [pad] * (6 - len(ids)) + ids}
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "text"


# ------------------------------------------------------------------------------ LangChain


def test_langchain_bind_tools_and_structured_output(server: Server) -> None:
    chat_models: Any = importlib.import_module("langchain_openai")
    pydantic: Any = importlib.import_module("pydantic")
    llm = chat_models.ChatOpenAI(
        model="smollm2",
        base_url=server.base_url + "/v3",
        api_key="unused",
        temperature=0,
        max_tokens=80,
        max_retries=0,
    )
    with_tools = llm.bind_tools([WEATHER], tool_choice="get_weather")
    message = with_tools.invoke("What is the weather in Paris?")
    (call,) = message.tool_calls
    assert call["name"] == "get_weather"
    jsonschema.validate(call["args"], schema_of("get_weather"))

    class City(pydantic.BaseModel):  # type: ignore[misc]
        name: str = pydantic.Field(max_length=20)
        country: str = pydantic.Field(max_length=20)

    structured = llm.with_structured_output(City, method="json_schema")
    city = structured.invoke("Answer in one line of compact JSON. Give me an example.")
    assert isinstance(city, City) and city.name


# ------------------------------------------------------------------------ parsers end to end

HERMES_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n'
    "</tool_call>"
)


@pytest.fixture(scope="module")
def parsing_server(smollm2_gguf: Path, launch: Launch) -> Iterator[Server]:
    args = [
        "--model_path",
        str(smollm2_gguf),
        "--tool_parser",
        "hermes3",
        "--reasoning_parser",
        "qwen3",
        "--enable_tool_guided_generation",
        "true",
        "--max_num_batched_tokens",
        "8192",
    ]
    with launch(args) as running:
        yield running


def test_hermes3_calls_are_parsed_unary_and_streaming(parsing_server: Server) -> None:
    # The regex makes the model write Hermes markup; the parser must return it as a tool call.
    fields = {"guided_regex": re.escape(HERMES_CALL)}
    with parsing_server.client() as sdk:
        reply = sdk.chat.completions.create(  # n=2: a parser per choice; logprobs still work
            model="smollm2",
            messages=ASK_WEATHER,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            max_tokens=120,
            extra_body=fields,
            n=2,
            logprobs=True,
        )
        stream = sdk.chat.completions.create(
            model="smollm2",
            messages=ASK_WEATHER,  # type: ignore[arg-type]
            tools=TOOLS,  # type: ignore[arg-type]
            max_tokens=120,
            extra_body=fields,
            stream=True,
        )
        pieces = [c.choices[0] for c in stream if c.choices]
    assert len(reply.choices) == 2
    for choice in reply.choices:
        assert choice.message.content is None and choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls or []
        assert call.function.name == "get_weather"  # type: ignore[union-attr]
        assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}  # type: ignore[union-attr]
        assert choice.logprobs is not None and choice.logprobs.content
    assert reply.usage is not None
    assert reply.usage.completion_tokens == sum(
        len(choice.logprobs.content or []) for choice in reply.choices if choice.logprobs
    )
    assert not any(p.delta.content for p in pieces)  # markup never leaks into content
    deltas = [d for p in pieces for d in p.delta.tool_calls or []]
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert json.loads(arguments) == {"city": "Paris", "unit": "celsius"}
    assert pieces[-1].finish_reason == "tool_calls"


def test_reasoning_is_split_out_and_skip_special_tokens_false_disables_parsing(
    parsing_server: Server,
) -> None:
    fields = {"guided_regex": "<think>I know this\\.</think>Paris\\."}
    body = {"model": "smollm2", "messages": ASK_WEATHER, "max_tokens": 30, **fields}
    with parsing_server.http() as http:
        parsed = http.post("/v3/chat/completions", json=body).json()["choices"][0]["message"]
        raw = http.post("/v3/chat/completions", json={**body, "skip_special_tokens": False}).json()[
            "choices"
        ][0]["message"]
    assert parsed["reasoning_content"] == "I know this."
    assert parsed["content"] == "Paris."
    assert raw["content"].startswith("<think>I know this.</think>Paris.")
    assert "reasoning_content" not in raw


def test_tool_guided_generation_compiles_the_familys_grammar(parsing_server: Server) -> None:
    # With tools and tool_choice auto the engine runs the Hermes triggered structural tag; the
    # request must be served (a grammar the engine cannot compile would break the engine).
    with parsing_server.client() as sdk:
        reply = sdk.chat.completions.create(
            model="smollm2",
            messages=ASK_WEATHER,
            tools=TOOLS,
            max_tokens=20,  # type: ignore[arg-type]
        )
        again = sdk.chat.completions.create(
            model="smollm2",
            messages=ASK_WEATHER,
            max_tokens=5,  # type: ignore[arg-type]
        )
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert again.choices[0].message.content
    log = parsing_server.log()
    assert "tool parser hermes3, reasoning parser qwen3, tool-guided generation" in log
