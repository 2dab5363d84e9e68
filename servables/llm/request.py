"""What a generation is asked for: the LLM servable's request, whichever protocol made it.

The OpenAI protocol (servables/openai) reads a chat, completions or Responses body into a
`GenerationRequest`; the servable turns it into engine requests (chat template, tokens, sampling,
the grammar the output must follow, how the output is parsed). Nothing here knows a wire format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from servables.llm.grammar_check import json_schema_text

Endpoint = Literal["chat", "completions"]


ConstraintKind = Literal["json_schema", "regex", "grammar", "structural_tags_config"]


@dataclass(frozen=True)
class ImageInput:
    """One image_url part: its URL (data, http(s) or path) and where it was in the request."""

    url: str
    param: str  # e.g. "messages[1].content[0].image_url.url", for error messages


@dataclass(frozen=True)
class ToolChoice:
    mode: Literal["auto", "none", "required", "function"] = "auto"
    name: str | None = None  # for mode "function"

    @property
    def forced(self) -> bool:
        return self.mode in ("required", "function")


@dataclass(frozen=True)
class OutputConstraint:
    """A checked grammar for the engine: one StructuredOutputConfig field and its text."""

    kind: ConstraintKind
    text: str
    param: str  # the request field it came from, for error messages

    def engine_fields(self) -> dict[str, str]:
        return {self.kind: self.text}


def json_schema_constraint(schema: Any, param: str) -> OutputConstraint:
    return OutputConstraint("json_schema", json_schema_text(schema, param), param)


@dataclass
class SamplingRequest:
    """What both endpoints share: output limits and sampling controls, as validated."""

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    length_penalty: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    n: int = 1
    best_of: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    skip_special_tokens: bool = True


@dataclass
class GenerationRequest:
    """A validated request for either endpoint."""

    endpoint: Endpoint
    model: str
    stream: bool
    include_usage: bool
    sampling: SamplingRequest
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt: str | list[int] | None = None
    echo: bool = False
    # Tool definitions for the template and the parser; None when there are none or
    # tool_choice is "none" (then the template does not see them and nothing is parsed).
    tools: list[dict[str, Any]] | None = None
    tool_choice: ToolChoice = field(default_factory=ToolChoice)
    parallel_tool_calls: bool = True
    # The grammar the engine must follow (response_format, guided_*, structured_outputs).
    constraint: OutputConstraint | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # image_url parts in order; message content holds `<ov_genai_image_N>` where image N was
    images: list[ImageInput] = field(default_factory=list)
    ignored_fields: list[str] = field(default_factory=list)

    @property
    def has_images(self) -> bool:
        return bool(self.images)


@dataclass(frozen=True)
class Limits:
    """Per-servable limits from the graph's LLMCalculatorOptions."""

    max_tokens_limit: int | None = None
    best_of_limit: int = 20
