"""Chat templates: where they are found, and rendering with the helpers HF templates rely on.

The golden comparison renders SmolLM2's real template and compares the prompt with what
openvino-genai's own tokenizer (the engine's) produces for the same conversation.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.llm.chat_template import (
    RESERVED_KWARGS,
    SINGLE_MESSAGE_TEMPLATE,
    ChatTemplate,
    TemplateSource,
    find_template,
    special_token,
)
from servables.llm.genai_template import GenAiChatTemplate

USER = [{"role": "user", "content": "Hello"}]


def render(text: str, messages: list[dict[str, Any]] | None = None, **kwargs: Any) -> str:
    return ChatTemplate(TemplateSource(text, "test")).render(
        USER if messages is None else messages, **kwargs
    )


def write_config(model_dir: Path, config: Any) -> None:
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


# ------------------------------------------------------------------------------------ lookup order


def test_chat_template_jinja_comes_first(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text("A", encoding="utf-8")
    (tmp_path / "template.jinja").write_text("B", encoding="utf-8")
    write_config(tmp_path, {"chat_template": "C"})
    source = find_template(tmp_path, "D")
    assert source.text == "A"
    assert source.origin == str(tmp_path / "chat_template.jinja")
    assert source.tool_text is None


def test_template_jinja_is_second(tmp_path: Path) -> None:
    (tmp_path / "template.jinja").write_text("B", encoding="utf-8")
    write_config(tmp_path, {"chat_template": "C"})
    source = find_template(tmp_path, "D")
    assert (source.text, source.origin) == ("B", str(tmp_path / "template.jinja"))


def test_blank_template_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text(" \n\t", encoding="utf-8")
    (tmp_path / "template.jinja").write_text("B", encoding="utf-8")
    assert find_template(tmp_path, None).text == "B"
    (tmp_path / "template.jinja").write_text("", encoding="utf-8")
    write_config(tmp_path, {"chat_template": "C"})
    assert find_template(tmp_path, None).text == "C"


def test_template_file_gets_tool_template_from_additional_templates(tmp_path: Path) -> None:
    (tmp_path / "chat_template.jinja").write_text("A", encoding="utf-8")
    extra = tmp_path / "additional_chat_templates"
    extra.mkdir()
    (extra / "tool_use.jinja").write_text("T", encoding="utf-8")
    assert find_template(tmp_path, None).tool_text == "T"


def test_tokenizer_config_string_is_third(tmp_path: Path) -> None:
    write_config(tmp_path, {"chat_template": "C", "bos_token": "<s>"})
    source = find_template(tmp_path, "D")
    assert (source.text, source.origin, source.tool_text) == ("C", "tokenizer_config.json", None)


def test_tokenizer_config_blank_string_falls_through(tmp_path: Path) -> None:
    write_config(tmp_path, {"chat_template": "   "})
    assert find_template(tmp_path, "D").text == "D"


def test_tokenizer_config_list_form(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        {
            "chat_template": [
                {"name": "tool_use", "template": "TOOLS"},
                {"name": "rag", "template": "RAG"},
                {"name": "default", "template": "DEFAULT"},
            ]
        },
    )
    source = find_template(tmp_path, "D")
    assert (source.text, source.origin, source.tool_text) == (
        "DEFAULT",
        "tokenizer_config.json",
        "TOOLS",
    )
    template = ChatTemplate(source)
    assert template.render(USER) == "DEFAULT"
    assert template.render(USER, tools=[{"type": "function"}]) == "TOOLS"
    assert template.render(USER, tools=[]) == "DEFAULT"  # no tools: the default template


def test_tokenizer_config_list_without_tool_use(tmp_path: Path) -> None:
    write_config(tmp_path, {"chat_template": [{"name": "default", "template": "X"}, "junk"]})
    source = find_template(tmp_path, None)
    assert (source.text, source.tool_text) == ("X", None)
    assert ChatTemplate(source).render(USER, tools=[{"type": "function"}]) == "X"


def test_tokenizer_config_list_without_default_falls_through(tmp_path: Path) -> None:
    write_config(tmp_path, {"chat_template": [{"name": "tool_use", "template": "T"}]})
    assert find_template(tmp_path, "D").text == "D"


def test_tokenizer_template_is_fourth(tmp_path: Path) -> None:
    write_config(tmp_path, {"bos_token": "<s>"})
    source = find_template(tmp_path, "D")
    assert (source.text, source.origin, source.tool_text) == ("D", "tokenizer", None)


def test_gguf_file_uses_the_tokenizer_template() -> None:
    assert find_template(None, "D") == TemplateSource("D", "tokenizer")


@pytest.mark.parametrize("tokenizer_template", [None, "", "  \n"])
def test_single_message_template_is_last(tmp_path: Path, tokenizer_template: str | None) -> None:
    source = find_template(tmp_path, tokenizer_template)
    assert source.text == SINGLE_MESSAGE_TEMPLATE
    assert source.tool_text is None
    assert find_template(None, tokenizer_template).text == SINGLE_MESSAGE_TEMPLATE


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '"text"'])
def test_unusable_tokenizer_config_is_ignored(tmp_path: Path, content: str) -> None:
    (tmp_path / "tokenizer_config.json").write_text(content, encoding="utf-8")
    assert find_template(tmp_path, "D").text == "D"
    assert special_token(tmp_path, "bos_token") is None


# -------------------------------------------------------------------------------- special tokens


def test_special_tokens_as_strings(tmp_path: Path) -> None:
    write_config(tmp_path, {"bos_token": "<s>", "eos_token": "</s>"})
    assert special_token(tmp_path, "bos_token") == "<s>"
    assert special_token(tmp_path, "eos_token") == "</s>"


def test_special_tokens_as_added_token_dicts(tmp_path: Path) -> None:
    added = {"__type": "AddedToken", "content": "<|begin|>", "lstrip": False, "normalized": False}
    write_config(tmp_path, {"bos_token": added, "eos_token": {"content": "<|end|>"}})
    assert special_token(tmp_path, "bos_token") == "<|begin|>"
    assert special_token(tmp_path, "eos_token") == "<|end|>"


def test_special_tokens_missing(tmp_path: Path) -> None:
    assert special_token(tmp_path, "bos_token") is None  # no tokenizer_config.json
    write_config(tmp_path, {"bos_token": None, "eos_token": {"id": 2}})
    assert special_token(tmp_path, "bos_token") is None
    assert special_token(tmp_path, "eos_token") is None
    assert special_token(None, "bos_token") is None


def test_bos_and_eos_reach_the_template() -> None:
    template = ChatTemplate(
        TemplateSource("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}", "t"),
        bos_token="<s>",
        eos_token="</s>",
    )
    assert template.render(USER) == "<s>Hello</s>"
    assert render("[{{ bos_token }}|{{ eos_token }}]") == "[|]"


# -------------------------------------------------------------------------------------- rendering


def test_raise_exception_becomes_invalid_request() -> None:
    text = (
        "{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
        "{{ raise_exception('System message must be first') }}{% endif %}{% endfor %}ok"
    )
    assert render(text) == "ok"
    with pytest.raises(InvalidRequest) as info:
        render(text, [*USER, {"role": "system", "content": "late"}])
    assert info.value.message == "System message must be first"
    assert info.value.param == "messages"


def test_template_runtime_errors_become_invalid_request() -> None:
    with pytest.raises(InvalidRequest) as info:
        render("{{ messages[0].content.missing.deeper }}")
    assert info.value.param == "messages"
    with pytest.raises(InvalidRequest) as info:
        render("{{ messages[0]['content'] + 1 }}")  # TypeError inside the template
    assert info.value.message.startswith("chat template could not render these messages: ")


def test_template_cannot_mutate_messages() -> None:
    messages = [{"role": "user", "content": "a"}]
    with pytest.raises(InvalidRequest):
        render("{{ messages.append(1) }}", messages)
    with pytest.raises(InvalidRequest):
        render("{{ messages[0].update({'content': 'b'}) }}", messages)
    assert messages == [{"role": "user", "content": "a"}]


def test_no_html_escaping() -> None:
    messages = [{"role": "user", "content": "<b>&'\"</b>"}]
    assert render("{{ messages[0].content }}", messages) == "<b>&'\"</b>"
    assert render("{{ messages[0].content | tojson }}", messages) == '"<b>&\'\\"</b>"'


def test_tojson_keeps_unicode_and_indent() -> None:
    tools = [{"name": "f", "description": "héllo <x>"}]
    assert render("{{ tools | tojson }}", tools=tools) == json.dumps(tools, ensure_ascii=False)
    assert render("{{ tools | tojson(indent=2) }}", tools=tools) == json.dumps(
        tools, ensure_ascii=False, indent=2
    )


def test_from_json_filter() -> None:
    assert render("{{ ('{\"a\": [1, 2]}' | from_json).a[1] }}") == "2"


def test_strftime_now() -> None:
    before = datetime.datetime.now()
    text = render("{{ strftime_now('%Y-%m-%d') }}")
    after = datetime.datetime.now()
    assert text in {before.strftime("%Y-%m-%d"), after.strftime("%Y-%m-%d")}
    assert render("{{ strftime_now('%d %b %Y') }}").count(" ") == 2


def test_loop_controls() -> None:
    messages = [{"role": "user", "content": c} for c in "abcd"]
    text = (
        "{% for m in messages %}{% if m.content == 'b' %}{% continue %}{% endif %}"
        "{% if m.content == 'd' %}{% break %}{% endif %}{{ m.content }}{% endfor %}"
    )
    assert render(text, messages) == "ac"


def test_trim_and_lstrip_blocks() -> None:
    text = (
        "  {% if true %}\nX\n    {% endif %}\nY\n  {% for i in [1, 2] %}\n{{ i }}\n  {% endfor %}\n"
    )
    # lstrip_blocks drops the indentation before a block tag, trim_blocks the newline after it.
    assert render(text) == "X\nY\n1\n2\n"


def test_add_generation_prompt() -> None:
    text = "{% if add_generation_prompt %}GEN{% else %}NOGEN{% endif %}"
    assert render(text) == "GEN"
    assert render(text, add_generation_prompt=False) == "NOGEN"


def test_tools_variable_is_undefined_without_tools() -> None:
    text = "{% if tools is defined %}T{{ tools | length }}{% else %}none{% endif %}"
    assert render(text) == "none"
    assert render(text, tools=[]) == "none"
    assert render(text, tools=[{"type": "function"}]) == "T1"


def test_extra_kwargs_reach_the_template() -> None:
    text = (
        "{% if enable_thinking is defined and not enable_thinking %}/no_think {% endif %}x={{ x }}"
    )
    assert render(text, extra={"enable_thinking": False, "x": [1]}) == "/no_think x=[1]"
    assert render(text) == "x="


@pytest.mark.parametrize("name", sorted(RESERVED_KWARGS))
def test_reserved_kwargs_are_refused(name: str) -> None:
    assert {"messages", "tools", "bos_token", "eos_token"} <= RESERVED_KWARGS
    with pytest.raises(InvalidRequest) as info:
        render("x", extra={name: "v"})
    assert info.value.message == f"chat_template_kwargs cannot set reserved name '{name}'"
    assert info.value.param == "chat_template_kwargs"


def test_template_that_does_not_compile() -> None:
    with pytest.raises(ValueError, match=r"chat template from somewhere does not compile"):
        ChatTemplate(TemplateSource("{% for %}", "somewhere"))
    with pytest.raises(ValueError, match=r"does not compile"):
        ChatTemplate(TemplateSource("ok", "somewhere", tool_text="{% if %}"))


# ----------------------------------------------------------------------- single-message template


def single() -> ChatTemplate:
    return ChatTemplate(TemplateSource(SINGLE_MESSAGE_TEMPLATE, "default"))


@pytest.mark.parametrize("content", ["Hello", "", "  two\nlines\n", "<b>&</b> {{ x }}"])
def test_single_message_template_passes_content_through(content: str) -> None:
    assert single().render([{"role": "user", "content": content}]) == content


@pytest.mark.parametrize("count", [2, 3])
def test_single_message_template_refuses_more(count: int) -> None:
    messages = [{"role": "user", "content": str(i)} for i in range(count)]
    with pytest.raises(InvalidRequest) as info:
        single().render(messages)
    assert info.value.message == "This servable accepts only single message requests"
    assert info.value.param == "messages"


# ---------------------------------------------------------------------- golden: SmolLM2's template

CONVERSATIONS = {
    "system+user": [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "What is 2+2? <b>&</b>"},
    ],
    "user only": [{"role": "user", "content": "Hello!"}],
    "multi-turn": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Name a colour 🎨"},
    ],
}


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_smollm2_template_matches_the_engine_tokenizer(smollm2_tokenizer: Any, name: str) -> None:
    messages = CONVERSATIONS[name]
    template_text = smollm2_tokenizer.chat_template
    assert "<|im_start|>" in template_text
    source = find_template(None, template_text)
    assert source.origin == "tokenizer"
    ours = ChatTemplate(source).render(messages, add_generation_prompt=True)
    golden = smollm2_tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert ours == golden
    assert ours.endswith("<|im_start|>assistant\n")


# ------------------------------------------------------- chat_template_mode: MINJA (genai renders)


def test_minja_renders_the_models_template_as_genai_does(smollm2_tokenizer: Any) -> None:
    source = find_template(None, smollm2_tokenizer.chat_template)
    minja = GenAiChatTemplate(source, smollm2_tokenizer)
    for messages in CONVERSATIONS.values():
        assert minja.render(messages) == smollm2_tokenizer.apply_chat_template(messages, True)


def test_minja_is_genais_engine_not_jinja2(smollm2_tokenizer: Any) -> None:
    """Python's `%` formatting renders in Jinja2, and is an error in minja: a template (or a
    quirk) renders as it does in OVMS's MINJA mode."""
    source = TemplateSource("{{ '%s!' % messages[0]['content'] }}", "test")
    messages = [{"role": "user", "content": "hi"}]
    assert ChatTemplate(source).render(messages) == "hi!"
    with pytest.raises(InvalidRequest, match="chat template could not render") as refused:
        GenAiChatTemplate(source, smollm2_tokenizer).render(messages)
    assert refused.value.param == "messages"
    assert "/home/" not in refused.value.message  # the build machine's paths left out


def test_minja_gets_tools_and_chat_template_kwargs(smollm2_tokenizer: Any) -> None:
    text = "{{ tools[0]['function']['name'] }} {{ mood }} {{ add_generation_prompt }}"
    minja = GenAiChatTemplate(TemplateSource(text, "test"), smollm2_tokenizer)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    rendered = minja.render(
        [{"role": "user", "content": "x"}], tools=tools, extra={"mood": "sunny"}
    )
    assert rendered == "get_weather sunny True"
    with pytest.raises(InvalidRequest, match="reserved name 'messages'"):
        minja.render([{"role": "user", "content": "x"}], extra={"messages": []})
