"""How a validated OpenAI request becomes engine requests, before any of them is sent.

The prompt (rendered and tokenized), the checks that depend on the servable (what its pipeline
supports, the model's context length, how many images a request may carry), the output length
(`max_new_tokens`), the engine's generation fields (sampling, stop strings, logprobs, speculative
decoding), the fan-out of `n` and `best_of` into engine requests, and the output plan: the
grammar the engine follows and the parser that reads the output. LLMServable.generate runs these
steps in order.
"""

from __future__ import annotations

import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from servables.errors import InvalidRequest
from servables.io.images.images import ImageArray
from servables.llm.chat_template import PromptTemplate
from servables.llm.engine.messages import AddRequest
from servables.llm.forced_calls import ForcedCallParser, forced_call_constraint
from servables.llm.grammar_check import check_json_schema
from servables.llm.model_files import PipelineType
from servables.llm.output_parsers import (
    OutputParser,
    make_output_parser,
    prompt_opens_reasoning,
    tool_call_structural_tag,
)
from servables.llm.request import GenerationRequest, OutputConstraint, SamplingRequest

# Used as max_new_tokens when neither the request, the graph nor the model bounds the output.
FALLBACK_MAX_NEW_TOKENS = 4096
SPECULATIVE_TOKENS = 5
PROMPT_LOOKUP_NGRAM = 3
# The fields of a model's generation_config.json that are defaults for requests that leave
# the temperature unset.
DEFAULT_SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "repetition_penalty", "do_sample")

# Images one request may carry. Each decodes to at most 4096x4096 RGB (48 MiB, see
# servables/io/images/images.py), and a small PNG of one colour can be that big once decoded, so
# without a cap one request within the body limit could ask for gigabytes.
MAX_IMAGES_PER_REQUEST = 32


def check_image_count(kind: PipelineType, device: str, count: int) -> None:
    """OVMS's rule for VLMs on NPU (docs/llm/reference.md): exactly one image per request;
    elsewhere at most MAX_IMAGES_PER_REQUEST. Checked before any image is fetched."""
    if count > MAX_IMAGES_PER_REQUEST:
        raise InvalidRequest(
            f"A request may carry at most {MAX_IMAGES_PER_REQUEST} images, but {count} were "
            "provided",
            param="messages",
        )
    if kind is PipelineType.VLM and device.upper().startswith("NPU") and count != 1:
        raise InvalidRequest(
            f"VLM servables on NPU accept exactly one image per request, but {count} were provided",
            param="messages",
        )


@dataclass(frozen=True)
class OutputPlan:
    """How a request's output is constrained and parsed (see output_plan)."""

    constraint: OutputConstraint | None = None
    make_parser: Callable[[], OutputParser | None] = lambda: None
    keep_special_tokens: bool = False


# Tokenizes one text, with or without the tokenizer's special tokens (see `encode_many`).
Encode = Callable[[str, bool], Awaitable[list[int]]]


async def prompt(
    request: GenerationRequest,
    kind: PipelineType,
    template: PromptTemplate | None,
    tokenizer: Any,
    encode: Encode,
    vocabulary_size: int | None,
) -> tuple[list[int], str]:
    """Token ids and text of the prompt (text is what `echo` repeats): the chat template
    rendered for chat, the text or token ids given for completions. `tokenizer` decodes a
    token-id prompt; `encode` tokenizes text."""
    if request.has_images and not kind.vision:
        raise InvalidRequest(
            "This servable supports only text input, but image_url has been provided",
            param="messages",
        )
    if request.endpoint == "completions":
        if kind.vision:
            raise InvalidRequest(
                "VLM Servable does not support the /completions endpoint. Use "
                "/chat/completions or /responses."
            )
        if isinstance(request.prompt, list):
            if vocabulary_size is not None and any(t >= vocabulary_size for t in request.prompt):
                raise InvalidRequest(
                    f"prompt token ids must be below the vocabulary size {vocabulary_size}",
                    param="prompt",
                )
            text: str = tokenizer.decode(list(request.prompt), skip_special_tokens=True)
            return list(request.prompt), text
        assert request.prompt is not None
        return await encode(request.prompt, True), request.prompt
    assert template is not None
    kwargs = dict(request.chat_template_kwargs)
    add_generation_prompt = bool(kwargs.pop("add_generation_prompt", True))
    text = template.render(
        request.messages,
        tools=request.tools,
        add_generation_prompt=add_generation_prompt,
        extra=kwargs,
    )
    return await encode(text, False), text


# Texts longer than this are tokenized on their own: a batch is padded to its longest text.
BATCH_TEXT_CHARACTERS = 16384


def encode_many(tokenizer: Any, texts: list[str], add_special_tokens: bool) -> list[list[int]]:
    """The token ids of each text, short ones in one tokenizer call (servables.llm.
    tokenizer_batcher). A batch comes back padded to its longest text; a row's own tokens are
    those its attention mask marks, on whichever side the tokenizer pads."""
    short = [i for i, text in enumerate(texts) if len(text) <= BATCH_TEXT_CHARACTERS]
    batched: dict[int, list[int]] = {}
    if short:
        encoded = tokenizer.encode([texts[i] for i in short], add_special_tokens=add_special_tokens)
        ids, mask = encoded.input_ids.data, encoded.attention_mask.data
        for row, index in enumerate(short):
            batched[index] = ids[row][mask[row] != 0].tolist()

    def alone(text: str) -> list[int]:
        ids: list[int] = (
            tokenizer.encode(text, add_special_tokens=add_special_tokens).input_ids.data[0].tolist()
        )
        return ids

    return [batched[i] if i in batched else alone(text) for i, text in enumerate(texts)]


def speculation_fields(draft: dict[str, Any] | None, properties: dict[str, Any]) -> dict[str, Any]:
    """Generation fields every request to a speculative pipeline carries.

    openvino-genai refuses requests to a prompt-lookup or draft-model pipeline that do not say
    how many tokens to propose; OVMS's defaults (5 tokens, 3-token n-grams).
    """
    fields: dict[str, Any] = {}
    if draft or properties.get("prompt_lookup"):
        fields["num_assistant_tokens"] = SPECULATIVE_TOKENS
    if properties.get("prompt_lookup"):
        fields["max_ngram_size"] = PROMPT_LOOKUP_NGRAM
    return fields


def check_capabilities(kind: PipelineType, sampling: SamplingRequest) -> None:
    """Stateful pipelines (LLM, VLM) have no logprobs, `n` or `best_of`."""
    if not kind.continuous_batching:
        name = kind.value
        if sampling.logprobs:
            raise InvalidRequest(
                f"logprobs are not supported by {name} servables", param="logprobs"
            )
        if sampling.n > 1 or sampling.best_of:
            raise InvalidRequest(f"n and best_of are not supported by {name} servables", param="n")


def max_new_tokens(
    request: GenerationRequest,
    prompt_tokens: int,
    max_length: int | None,
    max_tokens_limit: int | None,
) -> int:
    """The output length: the request's, checked against the model's context length, else
    the graph's `max_tokens_limit`, else what the context leaves."""
    requested = request.sampling.max_tokens
    limit = max_length
    if limit is not None:
        if prompt_tokens >= limit:
            raise InvalidRequest(
                f"Number of prompt tokens: {prompt_tokens} exceeds model max length: {limit}",
                param="messages" if request.endpoint == "chat" else "prompt",
            )
        if requested is not None and prompt_tokens + requested > limit:
            raise InvalidRequest(
                f"Number of prompt tokens: {prompt_tokens} + max tokens value: {requested} "
                f"exceeds model max length: {limit}",
                param="max_tokens",
            )
    if requested is not None:
        return requested
    if max_tokens_limit is not None:
        bound = max_tokens_limit
        return min(bound, limit - prompt_tokens) if limit is not None else bound
    return limit - prompt_tokens if limit is not None else FALLBACK_MAX_NEW_TOKENS


def generation_fields(
    sampling: SamplingRequest,
    max_new_tokens: int,
    defaults: dict[str, Any],
    speculation: dict[str, Any],
) -> dict[str, Any]:
    """The engine's GenerationConfig fields for one request.

    `defaults` (the model's DEFAULT_SAMPLING_FIELDS) apply when the request leaves the
    temperature unset.
    """
    config: dict[str, Any] = {"max_new_tokens": max_new_tokens, **speculation}
    temperature = sampling.temperature
    if temperature is None:
        if defaults.get("do_sample") and isinstance(defaults.get("temperature"), (int, float)):
            temperature = float(defaults["temperature"])
        for key in ("top_p", "top_k", "repetition_penalty"):
            if key in defaults:
                config[key] = defaults[key]
    if temperature:
        config["do_sample"] = True
        config["temperature"] = temperature
    else:
        config["do_sample"] = False
    for key in (
        "top_p",
        "min_p",
        "repetition_penalty",
        "length_penalty",
        "frequency_penalty",
        "presence_penalty",
    ):
        value = getattr(sampling, key)
        if value is not None:
            config[key] = value
    if sampling.top_k is not None:
        config["top_k"] = sampling.top_k if sampling.top_k > 0 else 0
    if sampling.stop:
        # The engine stops on whole tokens; keeping the stop string lets the detokenizer
        # cut the text exactly where the string starts.
        config["stop_strings"] = sorted(set(sampling.stop))
        config["include_stop_str_in_output"] = True
    if sampling.ignore_eos:
        config["ignore_eos"] = True
    if sampling.logprobs:
        config["logprobs"] = 1
    return config


def engine_requests(
    sampling: SamplingRequest,
    vision: bool,
    prompt_ids: list[int],
    prompt_text: str,
    config: dict[str, Any],
    images: list[ImageArray],
    new_request_id: Callable[[], int],
) -> list[AddRequest]:
    """`best_of` as one beam search whose sequences are the choices, else one engine request
    per choice (`n`), each with its own seed when sampling. A vision pipeline takes the prompt
    as text (it tokenizes with the images), others as token ids."""
    text_prompt = prompt_text if vision else None
    ids = None if vision else prompt_ids
    pictures = tuple(images)
    if sampling.best_of:
        beams = dict(config)
        beams.update(num_beams=sampling.best_of, num_return_sequences=sampling.n, do_sample=False)
        beams.pop("temperature", None)
        return [
            AddRequest(new_request_id(), ids, text_prompt, beams, final_only=True, images=pictures)
        ]
    seed = sampling.seed
    requests = []
    for index in range(sampling.n):
        choice_config = dict(config)
        if config.get("do_sample"):
            choice_config["rng_seed"] = seed + index if seed is not None else random.getrandbits(31)
        requests.append(
            AddRequest(new_request_id(), ids, text_prompt, choice_config, images=pictures)
        )
    return requests


def output_plan(
    request: GenerationRequest,
    prompt_text: str,
    tool_parser: str | None,
    reasoning_parser: str | None,
    tool_guided: bool,
) -> OutputPlan:
    """The grammar and the per-choice parser of a request.

    A forced tool choice ("required" or a named function) gets its own grammar and parser,
    whatever the model's family (servables/openai/tools.py). Otherwise the family's parsers
    run on chat output unless the request asked for special tokens (`skip_special_tokens:
    false`, OVMS's way to get the raw text); with `enable_tool_guided_generation`
    (`tool_guided`) and tools, the family's triggered structural tag keeps calls to the tools'
    schemas.
    """
    constraint = request.constraint
    tools = request.tools
    choice = request.tool_choice
    if request.endpoint != "chat":
        return OutputPlan(constraint)
    if tools and choice.forced:
        name = choice.name if choice.mode == "function" else None
        return OutputPlan(
            forced_call_constraint(tools, choice, request.parallel_tool_calls),
            lambda: ForcedCallParser(name),
        )
    if not request.sampling.skip_special_tokens:
        return OutputPlan(constraint)
    if not tools:
        tool_parser = None
    if tools and tool_parser and constraint is None and tool_guided:
        constraint = _tool_guidance(tool_parser, tools, request.parallel_tool_calls)
    starts = reasoning_parser is not None and prompt_opens_reasoning(prompt_text, reasoning_parser)

    def make_parser() -> OutputParser | None:
        return make_output_parser(
            tool_parser, reasoning_parser, tools=tools, starts_in_reasoning=starts
        )

    probe = make_parser()
    if probe is None:
        return OutputPlan(constraint)
    return OutputPlan(constraint, make_parser, probe.keep_special_tokens)


def _tool_guidance(
    tool_parser: str, tools: list[dict[str, Any]], parallel: bool
) -> OutputConstraint | None:
    for index, tool in enumerate(tools):
        check_json_schema(tool["function"]["parameters"], f"tools[{index}].function.parameters")
    tag = tool_call_structural_tag(tool_parser, tools, require_call=False, single_call=not parallel)
    if tag is None:
        return None
    return OutputConstraint("structural_tags_config", json.dumps(tag), "tools")
