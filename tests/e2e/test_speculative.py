"""Speculative decoding through the server: prompt lookup (plugin_config) and a draft model.

openvino-genai refuses a request to such a pipeline unless it says how many tokens to propose;
the servable gives OVMS's defaults. The model is the tiny random llama, and the draft is the same
model as OpenVINO IR (drafts must be IR): enough to run the mechanism end to end, not to make it
faster.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Launch

QUOTE: list[ChatCompletionMessageParam] = [
    {
        "role": "user",
        "content": "The old railway depot will become a public library with a children's wing. "
        "Repeat the previous sentence word for word.",
    }
]


@pytest.mark.parametrize("mode", ["prompt_lookup", "draft_model"])
def test_speculative_pipelines_answer_and_stream(
    mode: str, tiny_llm_gguf: Path, tiny_llm_ir_dir: Path, launch: Launch
) -> None:
    extra = (
        ["--plugin_config", '{"prompt_lookup": true}']
        if mode == "prompt_lookup"
        else ["--draft_source_model", str(tiny_llm_ir_dir)]
    )
    with launch(["--model_path", str(tiny_llm_gguf), "--cache_size", "1", *extra]) as server:
        with server.client() as sdk:
            unary = sdk.chat.completions.create(
                model=server.model, messages=QUOTE, temperature=0, max_tokens=24
            )
            assert unary.choices[0].message.content
            assert unary.usage is not None and 0 < unary.usage.completion_tokens <= 24
            chunks = list(
                sdk.chat.completions.create(
                    model=server.model,
                    messages=QUOTE,
                    temperature=0,
                    max_tokens=24,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == unary.choices[0].message.content
