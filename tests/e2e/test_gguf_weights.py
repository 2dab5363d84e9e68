"""`--gguf_weights`: a GGUF served with its weights requantized to OpenVINO's channel-wise int4.

On the tiny random llama with Q4_0 matrices (tests/conftest.py): the server answers as
openvino-genai does on the requantized graph, the graph it loads holds the file's own weights
(decoded by gguf-py, independently of genai) rounded channel-wise, and the answers differ from
those of the file's own weights (so the option reached the engine).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest

from servables.llm.gguf_graph import MODEL_XML
from servables.llm.gguf_requantize import channelwise, requantized_model_dir
from tests.e2e.conftest import Golden, Launch, Server

PROMPT = "The quick brown fox"
MAX_TOKENS = 16
LAYOUT = "int4_channelwise"


@pytest.fixture(scope="module")
def requantized_server(tiny_llm_q4_0_gguf: Path, launch: Launch) -> Iterator[Server]:
    args = ["--model_path", str(tiny_llm_q4_0_gguf), "--gguf_weights", LAYOUT]
    with launch(args) as server:
        yield server


def complete(server: Server) -> openai.types.Completion:
    return server.client().completions.create(
        model=server.model,
        prompt=PROMPT,
        temperature=0,
        max_tokens=MAX_TOKENS,
        extra_body={"ignore_eos": True},
    )


def test_answers_are_genais_on_the_requantized_graph(
    requantized_server: Server, tiny_llm_q4_0_gguf: Path
) -> None:
    expected = Golden(requantized_model_dir(tiny_llm_q4_0_gguf, LAYOUT)).completion(
        PROMPT, MAX_TOKENS
    )
    own = Golden(tiny_llm_q4_0_gguf).completion(PROMPT, MAX_TOKENS)
    (choice,) = complete(requantized_server).choices
    assert choice.text == expected.text
    assert choice.text != own.text


def lm_head(model: Any) -> Any:
    """The MatMul that computes the logits."""
    node = model.output(0).get_node()
    while node.get_type_name() != "MatMul":
        node = node.input_value(0).get_node()
    return node


def test_the_graph_holds_the_files_weights_rounded_channel_wise(
    requantized_server: Server, tiny_llm_q4_0_gguf: Path
) -> None:
    gguf: Any = importlib.import_module("gguf")
    ov: Any = importlib.import_module("openvino")
    (tensor,) = [
        t for t in gguf.GGUFReader(str(tiny_llm_q4_0_gguf)).tensors if t.name == "output.weight"
    ]
    file_weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
    codes, scales = channelwise(file_weights, 4)

    model_dir = requantized_model_dir(tiny_llm_q4_0_gguf, LAYOUT)
    model = ov.Core().read_model(str(model_dir / MODEL_XML))
    weight = lm_head(model).input_value(1)
    kinds = {
        node.get_output_element_type(0).get_type_name()
        for node in model.get_ordered_ops()
        if node.get_type_name() == "Constant"
    }
    assert "i4" in kinds and "u4" not in kinds
    compiled = ov.Core().compile_model(ov.Model([weight], [], "lm_head"), "CPU")
    request = compiled.create_infer_request()
    request.infer()
    got = np.array(request.get_output_tensor(0).data)
    want = codes * scales.astype(np.float32)
    assert got.shape == want.shape
    # genai decodes the blocks in float16, gguf-py in float32: a value on a rounding edge may
    # land one level away, nothing more.
    step = np.abs(scales.astype(np.float32))
    assert (np.abs(got - want) <= step * 1.001).all()
    assert np.mean(got == want) > 0.999
