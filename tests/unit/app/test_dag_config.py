"""pipeline_config_list as read_config reads it: OVMS's schema, then each pipeline's structure.

A schema error refuses the whole file (as OVMS's schema validation does) and names the key; a
pipeline that breaks OVMS's structural rules is still listed, with the reason it cannot be
served (it is reported UNAVAILABLE when loaded, the rest of the file is served). A pipeline
that can run is translated to a graph that the graph library validates.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from graphrt.serving.dag.servable import PipelineDefinition
from graphrt.serving.model_repository import ConfigFileError, ModelRepository, read_config
from graphruntime import ValidatedGraph
from servables.errors import ModelNotFound


def node(
    name: str,
    model: str = "m",
    inputs: dict[str, tuple[str, str]] | None = None,
    outputs: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A DL model node; `inputs` maps a model input to (node, data item), `outputs` an alias to
    a model output."""
    return {
        "name": name,
        "model_name": model,
        "type": "DL model",
        "inputs": [
            {key: {"node_name": n, "data_item": d}} for key, (n, d) in (inputs or {}).items()
        ],
        "outputs": [{"data_item": d, "alias": a} for a, d in (outputs or {"out": "y"}).items()],
        **extra,
    }


def pipeline(
    nodes: list[dict[str, Any]],
    outputs: dict[str, tuple[str, str]],
    name: str = "pipe",
    inputs: tuple[str, ...] = ("x",),
    **extra: Any,
) -> dict[str, Any]:
    return {
        "name": name,
        "inputs": list(inputs),
        "nodes": nodes,
        "outputs": [{k: {"node_name": n, "data_item": d}} for k, (n, d) in outputs.items()],
        **extra,
    }


def read(tmp_path: Path, *pipelines: dict[str, Any], **top: Any) -> list[Any]:
    path = tmp_path / "config.json"
    data = {"model_config_list": [], "pipeline_config_list": list(pipelines), **top}
    path.write_text(json.dumps(data), encoding="utf-8")
    return read_config(path)


def definition(tmp_path: Path, *pipelines: dict[str, Any], **top: Any) -> PipelineDefinition:
    found = [d for d in read(tmp_path, *pipelines, **top) if isinstance(d, PipelineDefinition)]
    assert len(found) == 1
    return found[0]


CHAIN = pipeline(
    [
        node("first", inputs={"x": ("request", "x")}, outputs={"mid": "y"}),
        node("second", inputs={"x": ("first", "mid")}),
    ],
    {"result": ("second", "out")},
)


# ------------------------------------------------------------------------------- the schema


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"extra": 1}, "unknown key 'extra' in pipeline_config_list[0]"),
        ({"nodes": None}, "pipeline_config_list[0].nodes must be an array"),
        ({"demultiply_count": 10_001}, "demultiply_count must be an integer from -1 to 10000"),
        ({"demultiply_count": True}, "demultiply_count must be an integer from -1 to 10000"),
        ({"inputs": ["x", 1]}, "pipeline_config_list[0].inputs[1] must be a string"),
        ({"outputs": [{"a": {}, "b": {}}]}, "outputs[0] must be an object with one key"),
    ],
)
def test_schema_errors_refuse_the_file(tmp_path: Path, change: dict[str, Any], detail: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        read(tmp_path, {**CHAIN, **change})
    assert detail in info.value.message
    assert str(tmp_path / "config.json") in info.value.message


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"type": "python"}, 'type must be "DL model" or "custom"'),
        ({"model_name": None}, "model_name must be a string"),
        ({"library_name": "lib"}, 'library_name does not belong to a node of type "DL model"'),
        ({"version": 0}, "version must be an integer of at least 1"),
        ({"params": {"a": 1}}, "params must be an object of strings"),
        ({"outputs": [{"data_item": "y"}]}, "outputs[0].alias is required"),
        ({"inputs": [{"x": {"node_name": "request"}}]}, "inputs[0].x.data_item is required"),
        ({"stateful": True}, "unknown key 'stateful' in pipeline_config_list[0].nodes[0]"),
    ],
)
def test_node_schema_errors(tmp_path: Path, change: dict[str, Any], detail: str) -> None:
    first = {**CHAIN["nodes"][0], **change}
    with pytest.raises(ConfigFileError) as info:
        read(tmp_path, {**CHAIN, "nodes": [first, CHAIN["nodes"][1]]})
    assert detail in info.value.message


def test_custom_node_needs_its_library_name(tmp_path: Path) -> None:
    custom = {"name": "c", "type": "custom", "inputs": [], "outputs": []}
    with pytest.raises(
        ConfigFileError, match='library_name is required for a node of type "custom"'
    ):
        read(tmp_path, pipeline([custom], {"o": ("c", "o")}))


def test_a_pipeline_shares_the_namespace_of_models_and_graphs(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"pipeline_config_list\[0\]\.name 'm' is used twice"):
        read(
            tmp_path,
            {**CHAIN, "name": "m"},
            model_config_list=[{"config": {"name": "m", "base_path": "m"}}],
        )


def test_params_of_a_model_node_are_ignored_out_loud(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = {**CHAIN["nodes"][0], "params": {"threshold": "0.5"}}
    with caplog.at_level(logging.WARNING):
        definition(tmp_path, {**CHAIN, "nodes": [first, CHAIN["nodes"][1]]})
    assert "pipeline_config_list[0].nodes[0].params is ignored" in caplog.text


def test_demultiply_count_zero_means_any_with_ovms_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        found = definition(tmp_path, {**CHAIN, "demultiply_count": 0})
    assert found.pipeline is not None and found.pipeline.demultiply_count == -1
    assert "demultiply_count 0 will be deprecated" in caplog.text


# ------------------------------------------------------------------ structure, per pipeline


def problem_of(tmp_path: Path, *pipelines: dict[str, Any], **top: Any) -> str:
    found = definition(tmp_path, *pipelines, **top)
    assert found.problem is not None and found.graph_text is None
    return found.problem


@pytest.mark.parametrize(
    ("nodes", "outputs", "detail"),
    [
        (
            [node("a", inputs={"x": ("request", "x")}), node("a", inputs={"x": ("a", "out")})],
            {"o": ("a", "out")},
            "has multiple nodes with name 'a'",
        ),
        (
            [node("request")],
            {"o": ("request", "x")},
            "a node cannot be named 'request' (the pipeline's own)",
        ),
        (
            [node("a", inputs={"x": ("ghost", "out")})],
            {"o": ("a", "out")},
            "node 'a' is connected to missing dependency node 'ghost'",
        ),
        (
            [node("a", inputs={"x": ("request", "nope")})],
            {"o": ("a", "out")},
            "node 'a' refers to missing data item 'nope' of the request (pipeline inputs: x)",
        ),
        (
            [node("a", inputs={"x": ("request", "x")})],
            {"o": ("a", "missing")},
            "node 'response' refers to missing data item 'missing' of node 'a' (its outputs: out)",
        ),
        (
            [node("a", inputs={"x": ("response", "o")})],
            {"o": ("a", "out")},
            "node 'a' uses the response node as a dependency",
        ),
        (
            [node("a", inputs={"x": ("b", "out")}), node("b", inputs={"x": ("a", "out")})],
            {"o": ("a", "out")},
            "nodes a, b form a cycle",
        ),
        (
            [node("a", inputs={"x": ("request", "x")}), node("lost", inputs={"x": ("a", "out")})],
            {"o": ("a", "out")},
            "node 'lost' is not connected to the response",
        ),
    ],
)
def test_structural_problems_name_the_node(
    tmp_path: Path, nodes: list[dict[str, Any]], outputs: dict[str, tuple[str, str]], detail: str
) -> None:
    assert problem_of(tmp_path, pipeline(nodes, outputs)) == f"pipeline pipe: {detail}"


def test_a_custom_node_is_refused_with_its_name_and_library(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    custom = {
        "name": "crop",
        "type": "custom",
        "library_name": "image_crop",
        "params": {"size": "64"},
        "inputs": [{"image": {"node_name": "request", "data_item": "x"}}],
        "outputs": [{"data_item": "crops", "alias": "crops"}],
    }
    libraries = [{"name": "image_crop", "base_path": "/ovms/lib/libcustom_node_image_crop.so"}]
    with caplog.at_level(logging.WARNING):
        problem = problem_of(
            tmp_path,
            pipeline([custom], {"o": ("crop", "crops")}),
            custom_node_library_config_list=libraries,
        )
    assert problem.startswith(
        "pipeline pipe: node 'crop' is a custom node of library 'image_crop' "
        "(/ovms/lib/libcustom_node_image_crop.so): graphrt does not load OVMS's custom node "
        "libraries"
    )
    assert "custom_node_library_config_list is not loaded" in caplog.text
    assert "libcustom_node_image_crop.so" in caplog.text


async def test_a_pipeline_that_cannot_load_leaves_other_names_alone(tmp_path: Path) -> None:
    custom = {"name": "c", "type": "custom", "library_name": "lib", "inputs": [], "outputs": []}
    repository = ModelRepository(tmp_path / "config.json")
    await repository.apply(read(tmp_path, pipeline([custom], {"o": ("c", "o")})))
    assert repository.servables["pipe"].status()[0] == "UNAVAILABLE"
    with pytest.raises(ModelNotFound, match="The model `other` does not exist"):
        repository.get("other")
    await repository.close()


DEMUX = node("split", inputs={"x": ("request", "x")}, outputs={"parts": "y"}, demultiply_count=3)


@pytest.mark.parametrize(
    ("nodes", "outputs", "detail"),
    [
        (
            [DEMUX, node("g", inputs={"x": ("request", "x")}, gather_from_node="split")],
            {"o": ("g", "out"), "p": ("split", "parts")},
            "node 'g' gathers from 'split', but the innermost demultiplexer of its inputs is "
            "none: demultiplexers must be gathered in LIFO order",
        ),
        (
            [DEMUX, node("g", inputs={"x": ("split", "parts")}, gather_from_node="ghost")],
            {"o": ("g", "out")},
            "node 'g' gathers from 'ghost', which does not exist",
        ),
        (
            [
                node("plain", inputs={"x": ("request", "x")}),
                node("g", inputs={"x": ("plain", "out")}, gather_from_node="plain"),
            ],
            {"o": ("g", "out")},
            "node 'g' gathers from 'plain', which is not a demultiplexer",
        ),
        (
            [DEMUX, node("both", inputs={"x": ("split", "parts"), "z": ("request", "x")})],
            {"o": ("both", "out")},
            "node 'both' takes inputs from different demultiplexing levels (request: []; "
            "split: [split]); gather them first (gather_from_node)",
        ),
        (
            [
                {**DEMUX, "demultiply_count": -1},
                node("more", inputs={"x": ("split", "parts")}, demultiply_count=2),
            ],
            {"o": ("more", "out")},
            "has multiple demultiplexers with at least one dynamic (demultiply_count -1); a "
            "dynamic one must be the only one",
        ),
    ],
)
def test_demultiplexing_rules(
    tmp_path: Path, nodes: list[dict[str, Any]], outputs: dict[str, tuple[str, str]], detail: str
) -> None:
    assert problem_of(tmp_path, pipeline(nodes, outputs)) == f"pipeline pipe: {detail}"


# ------------------------------------------------------------------------------- the graph


def test_chain_becomes_a_graph_of_model_calculators(tmp_path: Path) -> None:
    found = definition(tmp_path, CHAIN)
    assert found.problem is None and found.graph is not None
    graph = ValidatedGraph.from_config(found.graph.text)
    calculators = [n.calculator for n in graph.config.proto.node]
    assert (
        calculators
        == [
            "OpenVINOModelServerSessionCalculator",
            "OpenVINOInferenceCalculator",
        ]
        * 2
    )
    assert found.graph.input_streams == {"x": "x"}
    assert found.graph.output_streams == {"result": "second__out"}


def test_names_that_are_not_stream_names_are_mapped(tmp_path: Path) -> None:
    odd = pipeline(
        [node("Detect-1", inputs={"data:0": ("request", "Image In")}, outputs={"Boxes/0": "y"})],
        {"Boxes out": ("Detect-1", "Boxes/0"), "echo": ("request", "Image In")},
        inputs=("Image In",),
    )
    found = definition(tmp_path, odd)
    assert found.graph is not None
    ValidatedGraph.from_config(found.graph.text)
    assert found.graph.input_streams == {"Image In": "image_in"}
    assert found.graph.output_streams == {"Boxes out": "detect_1__boxes_0", "echo": "image_in"}


def test_demultiplexed_branches_are_gathered_before_the_response(tmp_path: Path) -> None:
    nested = pipeline(
        [
            DEMUX,
            node("inner", inputs={"x": ("split", "parts")}, outputs={"p": "y"}, demultiply_count=2),
            node("score", inputs={"x": ("inner", "p")}),
        ],
        {"scores": ("score", "out")},
    )
    found = definition(tmp_path, nested)
    assert found.problem is None and found.graph is not None
    graph = ValidatedGraph.from_config(found.graph.text)
    names = [n.name for n in graph.config.proto.node]
    assert names.index("response:gather:inner") < names.index("response:gather:split")
    score = next(n for n in graph.config.proto.node if n.name == "score")
    assert score.max_in_flight > 1  # branches overlap
