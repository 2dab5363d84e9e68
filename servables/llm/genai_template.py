"""`chat_template_mode: MINJA`: the chat template rendered by openvino-genai's own engine.

OVMS renders chat templates with Python's Jinja2 (JINJA, its default for text models) or with
openvino-genai's `Tokenizer.apply_chat_template`, a C++ engine built on minja (MINJA, its
default for vision models and the only one of builds without Python). graphrt renders with
Jinja2 unless a graph asks for MINJA (servables.llm.chat_template: Hugging Face's sandbox and
helpers); then this renderer takes the same template, tools and chat_template_kwargs, so a
template written for minja, quirks included, renders as OVMS renders it. minja takes
`bos_token` and `eos_token` from the tokenizer, and tool-call arguments as the client sent them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servables.errors import InvalidRequest, readable_message
from servables.llm.chat_template import TemplateSource, template_kwargs


class GenAiChatTemplate:
    """A PromptTemplate over an `openvino_genai.Tokenizer`'s apply_chat_template."""

    def __init__(self, source: TemplateSource, tokenizer: Any) -> None:
        self.source = source
        self._tokenizer = tokenizer

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> str:
        source = self.source
        text = source.tool_text if tools and source.tool_text else source.text
        try:
            rendered: str = self._tokenizer.apply_chat_template(
                [dict(message) for message in messages],
                add_generation_prompt,
                chat_template=text,
                tools=[dict(tool) for tool in tools] if tools else None,
                extra_context=template_kwargs(extra),
            )
        except RuntimeError as error:  # the template's own error, or minja's
            raise InvalidRequest(
                f"chat template could not render these messages: {readable_message(str(error))}",
                param="messages",
            ) from error
        return rendered
