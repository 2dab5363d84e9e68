"""A pipeline checked against its models' inputs and outputs, and its KServe metadata.

The models are stand-ins that only describe their tensors (what the check reads); the
end-to-end tests run real ones (tests/e2e/kserve/test_dag_pipelines.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from graphrt.serving.dag.config import parse_pipeline
from graphrt.serving.dag.signature import PipelineSignature, signature
from graphrt.serving.dag.structure import PipelineError, layout
from servables.errors import ModelNotFound
from servables.ov_model.model import TensorSpec


@dataclass
class DescribedModel:
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    batch_size: str | None = None
    shape: Any = None


@dataclass
class Models:
    found: dict[str, DescribedModel] = field(default_factory=dict)

    def model(self, name: str, version: int | None = None) -> Any:
        if name not in self.found:
            raise ModelNotFound(f"Model with requested name is not found: {name}")
        return self.found[name]


def fp32(name: str, *shape: int) -> TensorSpec:
    return TensorSpec(name, "FP32", shape)


MODELS = Models(
    {
        "detect": DescribedModel([fp32("image", 1, 3, 8, 8)], [fp32("boxes", 4, 1, 5)]),
        "classify": DescribedModel([fp32("box", -1, 5)], [fp32("probs", 1, 10)]),
        "vote": DescribedModel([fp32("all", 4, 1, 10)], [fp32("winner", 1, 10)]),
        "labels": DescribedModel([TensorSpec("ids", "INT64", (-1, 5))], [fp32("probs", 1, 10)]),
    }
)


def node(name: str, model: str, inputs: dict[str, tuple[str, str]], **extra: Any) -> dict[str, Any]:
    outputs = {"detect": "boxes", "classify": "probs", "vote": "winner", "labels": "probs"}
    return {
        "name": name,
        "model_name": model,
        "type": "DL model",
        "inputs": [{k: {"node_name": n, "data_item": d}} for k, (n, d) in inputs.items()],
        "outputs": [{"data_item": outputs.get(model, "y"), "alias": "out"}],
        **extra,
    }


def check(
    nodes: list[dict[str, Any]], outputs: dict[str, tuple[str, str]], **extra: Any
) -> PipelineSignature:
    entry = {
        "name": "pipe",
        "inputs": ["image"],
        "nodes": nodes,
        "outputs": [{k: {"node_name": n, "data_item": d}} for k, (n, d) in outputs.items()],
        **extra,
    }
    config = parse_pipeline(entry, "pipeline_config_list[0]")
    return signature(config, layout(config, {}), MODELS)


def fails(nodes: list[dict[str, Any]], outputs: dict[str, tuple[str, str]], **extra: Any) -> str:
    with pytest.raises(PipelineError) as info:
        check(nodes, outputs, **extra)
    return info.value.message


DETECT = node("detect", "detect", {"image": ("request", "image")}, demultiply_count=4)


def test_demultiplexed_outputs_are_gathered_by_the_response_with_a_new_dimension() -> None:
    found = check(
        [DETECT, node("classify", "classify", {"box": ("detect", "out")})],
        {"probs": ("classify", "out")},
    )
    assert found.inputs == (fp32("image", 1, 3, 8, 8),)
    assert found.outputs == (fp32("probs", 4, 1, 10),)


def test_a_gathering_node_takes_the_stacked_branches() -> None:
    found = check(
        [
            DETECT,
            node("classify", "classify", {"box": ("detect", "out")}),
            node("vote", "vote", {"all": ("classify", "out")}, gather_from_node="detect"),
        ],
        {"winner": ("vote", "out"), "echo": ("request", "image")},
    )
    assert found.outputs == (fp32("winner", 1, 10), TensorSpec("echo", "INVALID", ()))


def test_the_request_demultiplier_prefixes_the_inputs() -> None:
    found = check(
        [node("classify", "classify", {"box": ("request", "image")})],
        {"probs": ("classify", "out")},
        demultiply_count=-1,
    )
    assert found.inputs == (fp32("image", -1, -1, 5),)
    assert found.outputs == (fp32("probs", -1, 1, 10),)


def test_an_input_feeding_two_models_takes_the_intersection_of_their_shapes() -> None:
    wide = Models({**MODELS.found, "fixed": DescribedModel([fp32("box", 3, 5)], [fp32("p", 1)])})
    entry = {
        "name": "pipe",
        "inputs": ["x"],
        "nodes": [
            node("a", "classify", {"box": ("request", "x")}),
            {**node("b", "classify", {"box": ("request", "x")}), "model_name": "fixed"},
        ],
        "outputs": [{"o": {"node_name": "a", "data_item": "out"}}],
    }
    entry["nodes"][1]["outputs"] = [{"data_item": "p", "alias": "out"}]
    entry["outputs"].append({"p": {"node_name": "b", "data_item": "out"}})
    config = parse_pipeline(entry, "p")
    assert signature(config, layout(config, {}), wide).inputs == (fp32("x", 3, 5),)


@pytest.mark.parametrize(
    ("nodes", "outputs", "detail"),
    [
        (
            [node("a", "ghost", {"x": ("request", "image")})],
            {"o": ("a", "out")},
            "node 'a' refers to model 'ghost', which is not available: Model with requested "
            "name is not found: ghost",
        ),
        (
            [node("a", "classify", {"wrong": ("request", "image")})],
            {"o": ("a", "out")},
            "node 'a' has no input with name 'wrong' (model 'classify' takes box)",
        ),
        (
            [node("a", "classify", {})],
            {"o": ("a", "out")},
            "node 'a' has inputs box not connected to any source",
        ),
        (
            [
                node("d", "detect", {"image": ("request", "image")}),
                node("c", "classify", {"box": ("d", "out")}),
            ],
            {"o": ("c", "out")},
            "shape mismatch between node 'c' input 'box' and node 'd' output 'boxes': "
            "[-1, 5] vs [4, 1, 5]",
        ),
        (
            [DETECT, node("c", "labels", {"ids": ("detect", "out")})],
            {"o": ("c", "out")},
            "precision mismatch between node 'c' input 'ids' and node 'detect' output 'boxes': "
            "INT64 vs FP32",
        ),
        (
            [{**DETECT, "demultiply_count": 3}, node("c", "classify", {"box": ("detect", "out")})],
            {"o": ("c", "out")},
            "demultiply_count 3 of node 'detect' does not match the first dimension of output "
            "'boxes' of node 'detect' of shape [4, 1, 5]",
        ),
        (
            [node("c", "classify", {"box": ("request", "image")}, demultiply_count=1)],
            {"o": ("c", "out")},
            "output 'probs' of node 'c' of shape [1, 10] cannot be demultiplied by 'c': it "
            "needs at least 3 dimensions",
        ),
    ],
)
def test_model_checks_name_the_node_and_tensor(
    nodes: list[dict[str, Any]], outputs: dict[str, tuple[str, str]], detail: str
) -> None:
    assert fails(nodes, outputs) == f"pipeline pipe: {detail}"


def test_models_with_auto_shapes_are_refused() -> None:
    auto = DescribedModel([fp32("box", -1, 5)], [fp32("probs", 1, 10)], batch_size="auto")
    entry = {
        "name": "pipe",
        "inputs": ["x"],
        "nodes": [node("a", "classify", {"box": ("request", "x")})],
        "outputs": [{"o": {"node_name": "a", "data_item": "out"}}],
    }
    config = parse_pipeline(entry, "p")
    with pytest.raises(PipelineError, match='batch_size or shape "auto", which pipelines forbid'):
        signature(config, layout(config, {}), Models({"classify": auto}))
