"""Parse and validate OpenAI chat/completions and completions requests.

Rules and limits follow OpenVINO Model Server, so a request OVMS accepts is accepted here with the
same meaning, and one it refuses is refused with a message naming the field (OVMS's own wording
where it has one). Where OVMS is stricter than OpenAI for no good reason we follow OpenAI:
`include_stop_str_in_output: false` works with streaming (our detokenizer holds text back instead),
logprobs work in streaming, and a completions prompt may be token ids.

Unknown fields are ignored (new SDKs add fields all the time); the names of ignored fields are
returned so the server can log them. Chat messages and the completions prompt are read by
servables.openai.messages; this module reads every other field.
"""

from __future__ import annotations

from typing import Any

from servables.errors import InvalidRequest
from servables.io.request_fields import OVMS_LLM, RequestFields, is_integer, model_of
from servables.llm.request import Endpoint, GenerationRequest, Limits, SamplingRequest
from servables.openai.messages import parse_messages, parse_prompt
from servables.openai.structured_output import CONSTRAINT_FIELDS, parse_constraint
from servables.openai.tools import parse_tool_choice, parse_tools

UINT32_MAX = 4_294_967_295
MAX_STOP_STRINGS = 16


_COMMON_FIELDS = {
    "model",
    "stream",
    "stream_options",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "length_penalty",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "include_stop_str_in_output",
    "ignore_eos",
    "n",
    "best_of",
    "logprobs",
    "skip_special_tokens",
    "user",
    "service_tier",
    "store",
    "metadata",
    *CONSTRAINT_FIELDS,
}
_CHAT_FIELDS = {
    "messages",
    "max_completion_tokens",
    "top_logprobs",
    "tools",
    "tool_choice",
    "chat_template_kwargs",
    "response_format",
    "parallel_tool_calls",
}
_COMPLETION_FIELDS = {"prompt", "echo", "suffix"}


# ------------------------------------------------------------------------------------ readers


def _uint(fields: RequestFields, name: str) -> int | None:
    value = fields.unsigned(name)
    if value is not None and value > UINT32_MAX:
        raise InvalidRequest(f"{name} value can't be greater than {UINT32_MAX}", param=name)
    return value


def _number(
    fields: RequestFields,
    name: str,
    low: float | None = None,
    high: float | None = None,
    *,
    high_open: bool = False,
    range_text: str | None = None,
) -> float | None:
    number = fields.number(name)
    if number is None:
        return None
    too_high = high is not None and (number >= high if high_open else number > high)
    if (low is not None and number < low) or too_high:
        raise InvalidRequest(f"{name} out of range{range_text or f'({low}, {high})'}", param=name)
    return number


def _max_tokens(fields: RequestFields, name: str, limits: Limits, *, inclusive: bool) -> int | None:
    value = _uint(fields, name)
    if value is None:
        return None
    limit = limits.max_tokens_limit
    if limit is not None and (value > limit if inclusive else value >= limit):
        raise InvalidRequest(f"{name} exceeds limit provided in graph config: {limit}", param=name)
    return value


def _stop(fields: RequestFields) -> list[str]:
    value = fields.raw("stop")
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        if len(value) > MAX_STOP_STRINGS:
            raise InvalidRequest(
                f"stop array must have no more than {MAX_STOP_STRINGS} strings", param="stop"
            )
        if not all(isinstance(item, str) for item in value):
            raise InvalidRequest("stop array contains non string element", param="stop")
        return [item for item in value if item]
    raise InvalidRequest("stop is not a string or array of strings", param="stop")


def _stream_options(fields: RequestFields, stream: bool) -> bool:
    options = fields.raw("stream_options")
    if options is None:
        return False
    if not stream:
        raise InvalidRequest(
            "stream_options provided, but stream not set to true", param="stream_options"
        )
    if not isinstance(options, dict):
        raise InvalidRequest("stream_options is not an object", param="stream_options")
    unexpected = set(options) - {"include_usage", "continuous_usage_stats"}
    if unexpected:
        raise InvalidRequest(
            "Found unexpected stream options. Properties accepted in stream_options: include_usage",
            param="stream_options",
        )
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise InvalidRequest(
            "stream_options.include_usage is not a boolean", param="stream_options.include_usage"
        )
    return include_usage


def _sampling(
    fields: RequestFields, endpoint: Endpoint, stream: bool, limits: Limits
) -> SamplingRequest:
    sampling = SamplingRequest()
    sampling.max_tokens = _max_tokens(fields, "max_tokens", limits, inclusive=False)
    if endpoint == "chat":
        completion_tokens = _max_tokens(fields, "max_completion_tokens", limits, inclusive=True)
        if completion_tokens is not None:
            sampling.max_tokens = completion_tokens
    sampling.temperature = _number(fields, "temperature", 0.0, 2.0)
    sampling.top_p = _number(fields, "top_p", 0.0, 1.0)
    top_k = fields.integer("top_k")
    if top_k is not None:
        if top_k != -1 and top_k <= 0:
            raise InvalidRequest(
                "top_k must be -1 (all tokens) or a positive integer", param="top_k"
            )
        sampling.top_k = top_k
    sampling.min_p = _number(fields, "min_p", 0.0, 1.0, high_open=True, range_text=" [0.0, 1.0)")
    sampling.repetition_penalty = _number(fields, "repetition_penalty")
    if sampling.repetition_penalty is not None and sampling.repetition_penalty <= 0:
        raise InvalidRequest(
            "repetition_penalty must be greater than 0", param="repetition_penalty"
        )
    sampling.length_penalty = _number(fields, "length_penalty")
    sampling.frequency_penalty = _number(fields, "frequency_penalty", -2.0, 2.0)
    sampling.presence_penalty = _number(fields, "presence_penalty", -2.0, 2.0)
    seed = fields.integer("seed")
    if seed is not None:
        if not 0 <= seed <= UINT32_MAX:
            raise InvalidRequest(f"seed out of range [0, {UINT32_MAX}]", param="seed")
        sampling.seed = seed
    sampling.stop = _stop(fields)
    sampling.include_stop_str_in_output = bool(fields.boolean("include_stop_str_in_output"))
    sampling.ignore_eos = bool(fields.boolean("ignore_eos"))
    sampling.skip_special_tokens = fields.boolean("skip_special_tokens") is not False

    best_of = _uint(fields, "best_of")
    if best_of is not None:
        if best_of == 0:
            raise InvalidRequest("best_of value should be greater than 0", param="best_of")
        if best_of >= limits.best_of_limit:
            raise InvalidRequest(
                f"best_of exceeds limit provided in graph config: {limits.best_of_limit}",
                param="best_of",
            )
        if stream:
            raise InvalidRequest("best_of cannot be used in streaming mode", param="best_of")
        sampling.best_of = best_of
    n = _uint(fields, "n")
    if n is not None:
        if n == 0:
            raise InvalidRequest("n value should be greater than 0", param="n")
        if n > (best_of if best_of is not None else max(n, 1)):
            raise InvalidRequest("n value cannot be greater than best_of", param="n")
        if best_of is None and n > limits.best_of_limit:
            raise InvalidRequest(
                f"n exceeds limit provided in graph config: {limits.best_of_limit}", param="n"
            )
        sampling.n = n

    if endpoint == "chat":
        sampling.logprobs = bool(fields.boolean("logprobs"))
        top_logprobs = fields.integer("top_logprobs")
        if top_logprobs is not None:
            if not 0 <= top_logprobs <= 20:
                raise InvalidRequest("top_logprobs out of range [0, 20]", param="top_logprobs")
            if top_logprobs and not sampling.logprobs:
                raise InvalidRequest(
                    "top_logprobs requires logprobs to be set to true", param="top_logprobs"
                )
            sampling.top_logprobs = top_logprobs
    else:
        logprobs = fields.raw("logprobs")
        if logprobs is not None:
            if not is_integer(logprobs):
                raise InvalidRequest("logprobs accepts integer values", param="logprobs")
            if not 0 <= logprobs <= 5:
                raise InvalidRequest("logprobs out of range [0, 5]", param="logprobs")
            sampling.logprobs = True
            sampling.top_logprobs = logprobs
    return sampling


# --------------------------------------------------------------------------------- tools


def _tools(fields: RequestFields, body: dict[str, Any], request: GenerationRequest) -> None:
    """tools, tool_choice, parallel_tool_calls and the output constraint of a chat request."""
    given = fields.raw("tools")
    tools = parse_tools(given) if given is not None else None
    choice = parse_tool_choice(fields.raw("tool_choice"), tools)
    request.parallel_tool_calls = fields.boolean("parallel_tool_calls") is not False
    request.tool_choice = choice
    request.tools = tools if tools and choice.mode != "none" else None
    request.constraint = parse_constraint(body)
    if choice.forced and request.constraint is not None:
        raise InvalidRequest(
            f"tool_choice {choice.mode!r} cannot be combined with {request.constraint.param}: "
            "both decide the whole output",
            param="tool_choice",
        )


# ------------------------------------------------------------------------------------ entry


def parse_request(body: Any, endpoint: Endpoint, limits: Limits) -> GenerationRequest:
    """Validate a decoded JSON body for `endpoint`; raises InvalidRequest naming the field."""
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    fields = RequestFields(body, wording=OVMS_LLM)
    model = model_of(body)
    stream = fields.raw("stream")
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise InvalidRequest("Stream is not bool", param="stream")
    modalities = fields.raw("modalities")
    if isinstance(modalities, list) and "audio" in modalities:
        where = (
            "a graph with a text-to-speech node (see examples/voice_chat)"
            if endpoint == "chat"
            else "/chat/completions of a graph with a text-to-speech node"
        )
        raise InvalidRequest(
            f"This model answers in text only here: a spoken answer needs {where}",
            param="modalities",
        )
    include_usage = _stream_options(fields, stream)
    sampling = _sampling(fields, endpoint, stream, limits)
    request = GenerationRequest(endpoint, model, stream, include_usage, sampling)
    known = _COMMON_FIELDS | (_CHAT_FIELDS if endpoint == "chat" else _COMPLETION_FIELDS)
    request.ignored_fields = sorted(set(body) - known)
    if endpoint == "chat":
        request.messages, request.images = parse_messages(body)
        _tools(fields, body, request)
        kwargs = fields.raw("chat_template_kwargs")
        if kwargs is not None:
            if not isinstance(kwargs, dict):
                raise InvalidRequest(
                    "chat_template_kwargs must be an object", param="chat_template_kwargs"
                )
            request.chat_template_kwargs = kwargs
    else:
        request.prompt = parse_prompt(body)
        request.constraint = parse_constraint(body)
        request.echo = bool(fields.boolean("echo"))
        if fields.raw("suffix"):
            raise InvalidRequest("suffix is not supported", param="suffix")
    if sampling.max_tokens == 0 and not (endpoint == "completions" and request.echo):
        field_name = (
            "max_completion_tokens"
            if fields.raw("max_completion_tokens") is not None
            else "max_tokens"
        )
        raise InvalidRequest(
            f"{field_name} value should be greater than 0"
            + (" unless echo is set" if endpoint == "completions" else ""),
            param=field_name,
        )
    return request
