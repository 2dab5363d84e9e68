"""Find a model's chat template and render it the way Hugging Face transformers does.

Lookup order (OVMS's, plus its old default): `chat_template.jinja` or `template.jinja` in the model
directory, then `chat_template` in tokenizer_config.json (a string, or a list of named templates of
which "default" is used and "tool_use" serves requests with tools), then the template carried by
the tokenizer (GGUF metadata or the tokenizer IR's rt_info), then OVMS's historical default, which
accepts exactly one message and passes its content through.

Templates run in jinja2's immutable sandbox with the helpers HF templates expect: loop controls,
trim/lstrip blocks, `raise_exception`, `strftime_now`, a `tojson` that does not HTML-escape, and
`from_json`. A template error is the client's problem (e.g. roles that do not alternate), so it is
raised as InvalidRequest with the template's own message.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from servables.errors import InvalidRequest

logger = logging.getLogger(__name__)

SINGLE_MESSAGE_TEMPLATE = (
    "{% if messages|length != 1 %} {{ raise_exception('This servable accepts only single "
    "message requests') }}{% endif %}{{ messages[0]['content'] }}"
)
TEMPLATE_FILES = ("chat_template.jinja", "template.jinja")
RESERVED_KWARGS = frozenset({"messages", "tools", "bos_token", "eos_token"})


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(date_format: str) -> str:
    return datetime.datetime.now().strftime(date_format)


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _environment() -> ImmutableSandboxedEnvironment:
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.filters["tojson"] = _tojson
    environment.filters["from_json"] = json.loads
    return environment


@dataclass(frozen=True)
class TemplateSource:
    text: str
    origin: str  # where it came from, for the load log
    tool_text: str | None = None


def find_template(model_dir: Path | None, tokenizer_template: str | None) -> TemplateSource:
    """The template to use for a model directory (None for a bare .gguf file)."""
    if model_dir is not None:
        for name in TEMPLATE_FILES:
            path = model_dir / name
            if path.is_file():
                text = path.read_text(encoding="utf-8")
                if text.strip():
                    return TemplateSource(text, str(path), _tool_template(model_dir))
        config = _tokenizer_config(model_dir)
        configured = config.get("chat_template")
        if isinstance(configured, str) and configured.strip():
            return TemplateSource(configured, "tokenizer_config.json", _tool_template(model_dir))
        if isinstance(configured, list):
            named = {
                entry.get("name"): entry.get("template")
                for entry in configured
                if isinstance(entry, dict)
            }
            default = named.get("default")
            if isinstance(default, str):
                tool = named.get("tool_use")
                return TemplateSource(
                    default, "tokenizer_config.json", tool if isinstance(tool, str) else None
                )
    if tokenizer_template and tokenizer_template.strip():
        return TemplateSource(tokenizer_template, "tokenizer")
    return TemplateSource(SINGLE_MESSAGE_TEMPLATE, "default single-message template")


def _tokenizer_config(model_dir: Path) -> dict[str, Any]:
    path = model_dir / "tokenizer_config.json"
    if not path.is_file():
        return {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        logger.warning("ignoring unreadable %s: %s", path, error)
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _tool_template(model_dir: Path) -> str | None:
    path = model_dir / "additional_chat_templates" / "tool_use.jinja"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def special_token(model_dir: Path | None, name: str) -> str | None:
    """bos_token / eos_token as tokenizer_config.json gives them (string or AddedToken dict)."""
    if model_dir is None:
        return None
    value = _tokenizer_config(model_dir).get(name)
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class PromptTemplate(Protocol):
    """What renders a conversation into the prompt: ChatTemplate (Jinja2, graphrt's default)
    or servables.llm.genai_template's (openvino-genai's minja, `chat_template_mode: MINJA`)."""

    source: TemplateSource

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> str: ...


def template_kwargs(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """A request's chat_template_kwargs, refused if they would replace what the server sets."""
    for key in extra or {}:
        if key in RESERVED_KWARGS:
            raise InvalidRequest(
                f"chat_template_kwargs cannot set reserved name '{key}'",
                param="chat_template_kwargs",
            )
    return dict(extra or {})


def _dict_arguments(call: Any) -> Any:
    """A tool call whose JSON-string `arguments` are decoded to a dict (others untouched)."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    arguments = call["function"].get("arguments")
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return call
        if isinstance(decoded, dict):
            return {**call, "function": {**call["function"], "arguments": decoded}}
    return call


class ChatTemplate:
    """A compiled chat template; `render` produces the prompt text for a conversation."""

    def __init__(self, source: TemplateSource, bos_token: str = "", eos_token: str = "") -> None:
        environment = _environment()
        try:
            self._template = environment.from_string(source.text)
            self._tool_template = (
                environment.from_string(source.tool_text) if source.tool_text else self._template
            )
        except jinja2.TemplateSyntaxError as error:
            raise ValueError(
                f"chat template from {source.origin} does not compile: {error}"
            ) from error
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.arguments_as_dict = self._wants_dict_arguments()

    def _wants_dict_arguments(self) -> bool:
        """Dry-run the template on a tool call, as OVMS's ChatTemplateAnalyzer does.

        OpenAI clients send a call's `arguments` as a JSON string, but many templates (Qwen,
        Llama 3, Mistral) expect the dict HF's tool-use convention uses: they fail on a string,
        iterate over it, or JSON-encode it a second time. If the string form fails or comes out
        double-encoded while the dict form renders, arguments are given to this template as dicts.
        """
        probe_arguments = {"probe_argument": "probe_value"}

        def render(arguments: Any) -> str | None:
            call: dict[str, Any] = {
                "id": "call_probe",
                "type": "function",
                "function": {"name": "probe_function", "arguments": arguments},
            }
            messages = [
                {"role": "user", "content": "probe"},
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_probe", "content": "probe result"},
            ]
            try:
                return self._tool_template.render(
                    messages=messages,
                    tools=[{"type": "function", "function": {"name": "probe_function"}}],
                    bos_token=self.bos_token,
                    eos_token=self.eos_token,
                    add_generation_prompt=True,
                )
            except Exception:  # any failure of the user's template means "not this form"
                return None

        as_string = render(json.dumps(probe_arguments))
        as_dict = render(probe_arguments)
        if as_dict is None or "probe_value" not in as_dict:
            return False
        return as_string is None or '\\"probe_argument\\"' in as_string

    def _adapt(self, messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Messages as this template expects them (tool-call arguments as dicts if it wants)."""
        if not self.arguments_as_dict:
            return list(messages)
        adapted: list[Mapping[str, Any]] = []
        for message in messages:
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                message = {**message, "tool_calls": [_dict_arguments(call) for call in calls]}
            adapted.append(message)
        return adapted

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        context: dict[str, Any] = {
            "messages": self._adapt(messages),
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "add_generation_prompt": add_generation_prompt,
        }
        if tools:
            context["tools"] = list(tools)
        context.update(template_kwargs(extra))
        template = self._tool_template if tools else self._template
        try:
            return template.render(**context)
        except jinja2.TemplateError as error:
            raise InvalidRequest(str(error) or type(error).__name__, param="messages") from error
        except (TypeError, KeyError, IndexError, AttributeError, ValueError) as error:
            raise InvalidRequest(
                f"chat template could not render these messages: {error}", param="messages"
            ) from error
