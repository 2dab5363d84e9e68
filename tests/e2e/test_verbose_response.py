"""--verbose_response (OVMS's): answers carry `__verbose` with the prompt after the chat template
and the raw output, special tokens kept; a stream carries it on its final chunk only. Served by
the tiny random llama: the fields are the point, not the answer."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from pathlib import Path

    from conftest import Golden, LaunchExact

MESSAGES = [{"role": "user", "content": "Name a colour."}]


def test_unary_and_stream_carry_the_prompt_and_the_raw_output(
    tiny_llm_gguf: Path, launch_exact: LaunchExact, tiny_golden: Golden
) -> None:
    expected = tiny_golden.chat(MESSAGES, 10)
    prompt = tiny_golden.chat_prompt(MESSAGES)
    args = ["--model_path", str(tiny_llm_gguf), "--model_name", "smollm2", "--verbose_response"]
    body = {"model": "smollm2", "messages": MESSAGES, "temperature": 0, "max_tokens": 10}
    with launch_exact(args, model="smollm2") as server:
        unary = httpx.post(f"{server.base_url}/v3/chat/completions", json=body, timeout=60).json()
        with httpx.stream(
            "POST",
            f"{server.base_url}/v3/chat/completions",
            json={**body, "stream": True},
            timeout=60,
        ) as response:
            lines = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
        completion = httpx.post(
            f"{server.base_url}/v3/completions",
            json={"model": "smollm2", "prompt": "Red, green,", "max_tokens": 4},
            timeout=60,
        ).json()
    assert "choices" in unary, unary
    assert unary["choices"][0]["message"]["content"] == expected.text
    assert unary["__verbose"]["prompt"] == prompt
    assert unary["__verbose"]["content"].startswith(expected.text)
    chunks = [json.loads(line) for line in lines if line != "[DONE]"]
    verbose = [chunk for chunk in chunks if "__verbose" in chunk]
    assert len(verbose) == 1 and verbose[0]["choices"][0]["finish_reason"] is not None
    assert verbose[0]["__verbose"] == unary["__verbose"]
    assert completion["__verbose"]["prompt"] == "Red, green,"
