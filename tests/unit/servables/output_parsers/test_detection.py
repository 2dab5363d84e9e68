"""Parser auto-detection from chat templates, and prompts that open the reasoning block.

Template texts are short excerpts of the real templates (the lines that carry each family's
markers, as in OVMS's src/test/llm/chat_templates and the models' tokenizer_config.json); the
rules are OVMS's ChatTemplateAnalyzer, most specific markers first.
"""

from __future__ import annotations

import pytest

from servables.llm.output_parsers import detect_parsers, prompt_opens_reasoning

QWEN3 = (
    """{{- "\\n</tools>\\n\\nFor each function call, return a json object with function name """
    """and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": """
    """<function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n')"""
    """.split('<think>')[-1].lstrip('\\n') %}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}"""
)

QWEN25_INSTRUCT = """{{- "\\n</tools>\\n\\nFor each function call, return a json object with \
function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": \
<function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
                {{- '<tool_call>\\n{"name": "' }}"""

QWEN3_CODER = """    {{- '\\n\\nIf you choose to call a function ONLY reply in the following \
format with NO suffix:\\n\\n<tool_call>\\n<function=example_function_name>\\n\
<parameter=example_parameter_1>\\nvalue_1\\n</parameter>\\n</function>\\n</tool_call>' }}
            {{- '\\n<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"""

QWEN36 = (
    QWEN3_CODER
    + """
            {%- if '</think>' in content %}
    {%- else %}
        {{- '<think>\\n' }}"""
)

PHI4_MINI = """  * prefix function calls with functools marker (no closing marker required)
  * all function calls should be generated in a single JSON list formatted as \
functools[{"name": [function name], "arguments": [function arguments as JSON]}, ...]"""

MISTRAL_V03 = """            {{- "[AVAILABLE_TOOLS] [" }}
            {{- "[/AVAILABLE_TOOLS]" }}
        {{- "[TOOL_CALLS] [" }}"""

DEVSTRAL = """\\nWhen generating the tool call, follow the format: [TOOL_CALLS]tool_name[ARGS]\
arguments as json\\n\\n
    {%- set tools_description = "[AVAILABLE_TOOLS]" + (tools | tojson) + "[/AVAILABLE_TOOLS]" %}
                {{- "[TOOL_CALLS]" + tool['function']['name'] + "[ARGS]" + arguments }}"""

GPT_OSS = """    {{- "# Valid channels: analysis, commentary, final. Channel must be included \
for every message." }}
            {%- if "<|channel|>analysis<|message|>" in message.content or \
"<|channel|>final<|message|>" in message.content %}"""

LLAMA31 = """            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
        {{- '{"name": "' + tool_call.name + '", ' }}"""

DEEPSEEK_R1_DISTILL = """{% if '</think>' in content %}{% set content = \
content.split('</think>')[-1] %}{% endif %}
{% if add_generation_prompt %}{{'<\uff5cAssistant\uff5c><think>\\n'}}{% endif %}"""

SMOLLM2 = """{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}\
{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face\
<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + \
'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}\
{% endif %}"""

LFM25 = """{%- set preserve_thinking = preserve_thinking | default(false) -%}
{%- set keep_past_thinking = keep_past_thinking | default(false) -%}
        {{- "<|tool_call_start|>" + tool_calls_ns.tool_calls | join(", ") + "<|tool_call_end|>" -}}
    {%- if message.thinking -%}"""

GEMMA4 = """        {{- '<|tool_call>call:' + function['name'] + '{' -}}"""


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (QWEN3, ("hermes3", "qwen3")),
        (QWEN25_INSTRUCT, ("hermes3", None)),
        (QWEN3_CODER, ("qwen3coder", None)),
        (QWEN36, ("qwen3coder", "qwen3")),
        (PHI4_MINI, ("phi4", None)),
        (MISTRAL_V03, ("mistral", None)),
        (DEVSTRAL, ("devstral", None)),
        (GPT_OSS, ("gptoss", "gptoss")),
        (LLAMA31, ("llama3", None)),
        (DEEPSEEK_R1_DISTILL, (None, "qwen3")),
        (SMOLLM2, (None, None)),
        ("", (None, None)),
    ],
    ids=[
        "qwen3",
        "qwen2.5",
        "qwen3-coder",
        "qwen3.6",
        "phi4-mini",
        "mistral-7b-v0.3",
        "devstral",
        "gpt-oss",
        "llama3.1",
        "deepseek-r1-distill",
        "smollm2",
        "empty",
    ],
)
def test_detects_the_family_from_its_template(
    template: str, expected: tuple[str | None, str | None]
) -> None:
    assert detect_parsers(template) == expected


def test_lfm2_and_gemma4_templates_pick_their_parsers() -> None:
    assert detect_parsers(LFM25) == ("lfm2", "lfm2")
    assert detect_parsers("{{- '<|tool_call_start|>' -}}") == ("lfm2", None)  # LFM2: no thinking
    assert detect_parsers(GEMMA4) == ("gemma4", "gemma4")
    assert detect_parsers(ONYX) == ("onyx", "onyx")


ONYX = "<|start|>{{ role }}<|message|>{{ content }}<|eom|><|eot|>"
# MiniCPM5's template: calls as `<function name=...><param name=...>`, and a thinking switch.
MINICPM5 = (
    "{%- macro call(c) -%}{{ '<function name=\"' ~ c.name ~ '\">' }}"
    "{%- for k, v in c.arguments.items() %}{{ '<param name=\"' ~ k ~ '\">' ~ v ~ '</param>' }}"
    "{%- endfor %}{{ '</function>' }}{%- endmacro %}"
    "{%- if enable_thinking %}{{ '<think>\\n' }}{%- endif %}"
)


def test_minicpm5_templates_pick_its_parsers() -> None:
    """Every one of OVMS's parser families is implemented: none is detected and left off."""
    assert detect_parsers(MINICPM5) == ("minicpm5", "minicpm5")
    assert prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", "minicpm5")


@pytest.mark.parametrize(
    ("prompt", "opens"),
    [
        ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n", True),
        ("<\uff5cUser\uff5c>Hi<\uff5cAssistant\uff5c><think>\n", True),  # DeepSeek-R1
        ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False),  # enable_thinking=False
        ("<|im_start|>assistant\n", False),
        ("Explain the <think> tag.<|im_end|>\n<|im_start|>assistant\n", False),
    ],
)
def test_a_prompt_ending_in_an_open_think_tag_starts_the_output_in_reasoning(
    prompt: str, opens: bool
) -> None:
    assert prompt_opens_reasoning(prompt, "qwen3") is opens


def test_harmony_output_never_starts_inside_reasoning() -> None:
    assert not prompt_opens_reasoning("<|start|>assistant<think>\n", "gptoss")
