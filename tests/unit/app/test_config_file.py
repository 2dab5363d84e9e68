"""read_config: OVMS's config.json schema, its defaults and path rules, and its error messages.

Every schema error is a ConfigFileError whose message starts with the file's path and names the
offending key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphrt.serving.graph_servable import GraphDefinition
from graphrt.serving.model_repository import ConfigFileError, read_config
from servables.ov_model.versions import ModelConfig, VersionPolicy


def write(tmp_path: Path, data: Any, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def error_of(path: Path) -> ConfigFileError:
    with pytest.raises(ConfigFileError) as info:
        read_config(path)
    return info.value


def assert_error(tmp_path: Path, data: Any, detail: str, *keys: str) -> None:
    path = write(tmp_path, data)
    error = error_of(path)
    assert error.message == f"{path}: {detail}"
    assert str(error) == error.message
    assert str(path) in error.message
    for key in keys:
        assert key in error.message


def graphs(*entries: Any) -> dict[str, Any]:
    return {"model_config_list": [], "mediapipe_config_list": list(entries)}


# ---------------------------------------------------------------------------- the file itself


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    error = error_of(path)
    assert error.message.startswith(f"{path}: cannot read the file: ")
    assert "No such file" in error.message


def test_directory_instead_of_file(tmp_path: Path) -> None:
    error = error_of(tmp_path)
    assert error.message.startswith(f"{tmp_path}: cannot read the file: ")


@pytest.mark.parametrize("text", ["{", "", "{'model_config_list': []}", '{"a": 1,}'])
def test_invalid_json(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    error = error_of(path)
    assert error.message.startswith(f"{path}: is not valid JSON: ")


@pytest.mark.parametrize("text", ["[]", '"text"', "3", "null"])
def test_top_level_not_an_object(tmp_path: Path, text: str) -> None:
    assert_error(tmp_path, text, "the top level must be a JSON object")


# -------------------------------------------------------------------------------- top level


def test_unknown_top_level_key(tmp_path: Path) -> None:
    data = {"model_config_list": [], "mediapipe_config_lists": [], "zzz": 1}
    assert_error(
        tmp_path,
        data,
        "unknown key 'mediapipe_config_lists' at the top level",
        "mediapipe_config_lists",
    )


def test_missing_model_config_list(tmp_path: Path) -> None:
    assert_error(
        tmp_path,
        {"mediapipe_config_list": []},
        "missing required key 'model_config_list' (it may be [])",
        "model_config_list",
    )


@pytest.mark.parametrize("value", [{}, "x", None, 1])
def test_model_config_list_not_an_array(tmp_path: Path, value: Any) -> None:
    assert_error(
        tmp_path,
        {"model_config_list": value},
        "'model_config_list' must be an array",
        "model_config_list",
    )


@pytest.mark.parametrize("value", [{}, "x", None, 1])
def test_mediapipe_config_list_not_an_array(tmp_path: Path, value: Any) -> None:
    assert_error(
        tmp_path,
        {"model_config_list": [], "mediapipe_config_list": value},
        "'mediapipe_config_list' must be an array",
        "mediapipe_config_list",
    )


def test_empty_config(tmp_path: Path) -> None:
    assert read_config(write(tmp_path, {"model_config_list": []})) == []
    assert read_config(write(tmp_path, graphs())) == []


def test_all_ovms_top_level_keys_are_accepted(tmp_path: Path) -> None:
    data = {
        "model_config_list": [],
        "mediapipe_config_list": [],
        "pipeline_config_list": [],
        "custom_node_library_config_list": [],
        "custom_loader_config_list": [],
        "monitoring": {"metrics": {"enable": True}},
    }
    assert read_config(write(tmp_path, data)) == []


# ----------------------------------------------------------------------- mediapipe entries


@pytest.mark.parametrize("entry", ["llm", ["llm"], None, 1])
def test_entry_not_an_object(tmp_path: Path, entry: Any) -> None:
    assert_error(
        tmp_path,
        graphs({"name": "a"}, entry),
        "mediapipe_config_list[1] must be an object",
        "mediapipe_config_list[1]",
    )


def test_entry_unknown_key(tmp_path: Path) -> None:
    assert_error(
        tmp_path,
        graphs({"name": "a", "graph": "g.pbtxt"}),
        "unknown key 'graph' in mediapipe_config_list[0]",
        "graph",
        "mediapipe_config_list[0]",
    )


@pytest.mark.parametrize("entry", [{}, {"name": None}, {"name": ""}, {"base_path": "x"}])
def test_entry_missing_name(tmp_path: Path, entry: dict[str, Any]) -> None:
    assert_error(
        tmp_path,
        graphs(entry),
        "mediapipe_config_list[0].name is required",
        "mediapipe_config_list[0].name",
    )


def test_entry_duplicate_name(tmp_path: Path) -> None:
    assert_error(
        tmp_path,
        graphs({"name": "a"}, {"name": "b"}, {"name": "a", "base_path": "other"}),
        "mediapipe_config_list[2].name 'a' is used twice",
        "mediapipe_config_list[2].name",
    )


@pytest.mark.parametrize("key", ["name", "base_path", "graph_path", "subconfig"])
@pytest.mark.parametrize("value", [1, ["x"], {"x": 1}, True])
def test_entry_non_string_values(tmp_path: Path, key: str, value: Any) -> None:
    entry = {"name": "a", key: value}
    assert_error(
        tmp_path,
        graphs(entry),
        f"mediapipe_config_list[0].{key} must be a string",
        f"mediapipe_config_list[0].{key}",
    )


# ------------------------------------------------------------------------- model_config_list


def models(*entries: Any) -> dict[str, Any]:
    return {"model_config_list": list(entries)}


@pytest.mark.parametrize("entry", [{}, {"config": None}, "model", None])
def test_model_entry_needs_a_config_object(tmp_path: Path, entry: Any) -> None:
    data = models({"config": {"name": "ok", "base_path": "m"}}, entry)
    assert_error(
        tmp_path,
        data,
        "model_config_list[1] must be an object with a 'config' object",
        "model_config_list[1]",
    )


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ({}, "model_config_list[0].config.name is required"),
        ({"name": 1, "base_path": "m"}, "model_config_list[0].config.name is required"),
        ({"name": "m"}, "model_config_list[0].config.base_path is required"),
        (
            {"name": "m", "base_path": "m", "nireq": -1},
            "model_config_list[0].config.nireq must be a non-negative integer",
        ),
        (
            {"name": "m", "base_path": "m", "plugin_config": "{oops"},
            "model_config_list[0].config.plugin_config is not valid JSON",
        ),
        (
            {
                "name": "m",
                "base_path": "m",
                "model_version_policy": {"latest": {"num_versions": 0}},
            },
            "model_config_list[0].config.model_version_policy.latest.num_versions must be >= 1",
        ),
        (
            {"name": "m", "base_path": "m", "model_version_policy": {"newest": {}}},
            "model_config_list[0].config.unknown model_version_policy 'newest'",
        ),
        (
            {"name": "m", "base_path": "m", "colour": "red"},
            "unknown key 'colour' in model_config_list[0].config",
        ),
    ],
)
def test_model_config_errors_name_the_key(tmp_path: Path, config: Any, detail: str) -> None:
    assert_error(tmp_path, models({"config": config}), detail)


def test_plain_models_are_read_with_ovms_defaults(tmp_path: Path) -> None:
    data = {
        **models(
            {"config": {"name": "resnet", "base_path": "resnet"}},
            {
                "config": {
                    "name": "bert",
                    "base_path": "/models/bert",
                    "target_device": "GPU",
                    "nireq": 4,
                    "plugin_config": '{"PERFORMANCE_HINT": "LATENCY"}',
                    "model_version_policy": {"specific": {"versions": [1, 3]}},
                    "shape": "(1,128)",
                    "batch_size": 2,
                }
            },
        ),
        "mediapipe_config_list": [{"name": "llm"}],
    }
    resnet, bert, llm = read_config(write(tmp_path, data))
    assert isinstance(resnet, ModelConfig) and isinstance(bert, ModelConfig)
    assert isinstance(llm, GraphDefinition)
    assert resnet.base_path == tmp_path / "resnet"
    assert (resnet.target_device, resnet.nireq, resnet.version_policy) == (
        "CPU",
        0,
        VersionPolicy(),
    )
    assert bert.base_path == Path("/models/bert")
    assert bert.plugin_config == {"PERFORMANCE_HINT": "LATENCY"}
    assert bert.version_policy.select([1, 2, 3, 4]) == [1, 3]
    assert (bert.target_device, bert.nireq, bert.shape, bert.batch_size) == (
        "GPU",
        4,
        "(1,128)",
        "2",
    )


def test_models_and_graphs_share_one_namespace(tmp_path: Path) -> None:
    data = {
        **models({"config": {"name": "llm", "base_path": "m"}}),
        "mediapipe_config_list": [{"name": "llm"}],
    }
    assert_error(tmp_path, data, "mediapipe_config_list[0].name 'llm' is used twice")


def test_a_graph_subconfig_adds_its_models(tmp_path: Path) -> None:
    (tmp_path / "pipe").mkdir()
    (tmp_path / "pipe" / "subconfig.json").write_text(
        json.dumps(models({"config": {"name": "detector", "base_path": "models/detector"}}))
    )
    definitions = read_config(write(tmp_path, graphs({"name": "pipe"})))
    detector, pipe = definitions
    assert isinstance(detector, ModelConfig) and isinstance(pipe, GraphDefinition)
    assert detector.base_path == tmp_path / "pipe" / "models" / "detector"  # relative to it
    assert pipe.problem is None


@pytest.mark.parametrize(
    ("subconfig", "problem"),
    [
        ('{"model_config_list": [], "mediapipe_config_list": []}', "unknown key"),
        ("{broken", "is not valid JSON"),
        (None, "cannot read the file"),
    ],
)
def test_a_broken_subconfig_makes_only_its_graph_unavailable(
    tmp_path: Path, subconfig: str | None, problem: str
) -> None:
    (tmp_path / "pipe").mkdir()
    if subconfig is not None:
        (tmp_path / "pipe" / "sub.json").write_text(subconfig)
    data = graphs({"name": "pipe", "subconfig": "sub.json"}, {"name": "other"})
    pipe, other = read_config(write(tmp_path, data))
    assert isinstance(pipe, GraphDefinition) and isinstance(other, GraphDefinition)
    assert pipe.problem is not None
    assert pipe.problem.startswith(f"subconfig {tmp_path / 'pipe' / 'sub.json'}: ")
    assert problem in pipe.problem
    assert other.problem is None


# ----------------------------------------------------------------------- defaults and paths


def test_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, graphs({"name": "smol"}))
    (definition,) = read_config(path)
    assert isinstance(definition, GraphDefinition)
    assert definition.name == "smol"
    assert definition.base_path == (tmp_path / "smol").resolve()
    assert definition.graph_path == (tmp_path / "smol" / "graph.pbtxt").resolve()
    assert definition.graph_text is None
    assert definition.subconfig is None


def test_null_paths_take_the_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path, graphs({"name": "smol", "base_path": None, "graph_path": None, "subconfig": None})
    )
    (definition,) = read_config(path)
    assert definition.base_path == (tmp_path / "smol").resolve()
    assert definition.graph_path == (tmp_path / "smol" / "graph.pbtxt").resolve()
    assert definition.subconfig is None


def test_relative_paths(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    entry = {
        "name": "llm",
        "base_path": "../models/qwen",
        "graph_path": "graphs/chat.pbtxt",
        "subconfig": "subconfig.json",
    }
    (definition,) = read_config(write(config_dir, graphs(entry)))
    base = (tmp_path / "models" / "qwen").resolve()
    assert definition.base_path == base
    assert definition.graph_path == base / "graphs" / "chat.pbtxt"
    assert definition.subconfig == base / "subconfig.json"


def test_graph_path_relative_to_default_base(tmp_path: Path) -> None:
    (definition,) = read_config(write(tmp_path, graphs({"name": "a", "graph_path": "g.pbtxt"})))
    assert definition.graph_path == (tmp_path / "a" / "g.pbtxt").resolve()


def test_absolute_paths(tmp_path: Path) -> None:
    base = tmp_path / "abs" / "base"
    graph = tmp_path / "elsewhere" / "graph.pbtxt"
    entry = {"name": "a", "base_path": str(base), "graph_path": str(graph)}
    (definition,) = read_config(write(tmp_path / "", graphs(entry)))
    assert definition.base_path == base.resolve()
    assert definition.graph_path == graph.resolve()


def test_paths_are_relative_to_the_config_file_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cwd").mkdir()
    write(tmp_path / "cfg", graphs({"name": "a", "base_path": "m"}))
    monkeypatch.chdir(tmp_path / "cwd")
    (definition,) = read_config(Path("../cfg/config.json"))
    assert definition.base_path == (tmp_path / "cfg" / "m").resolve()
    assert definition.base_path.is_absolute()
    assert definition.graph_path is not None and definition.graph_path.is_absolute()


def test_entries_keep_their_order(tmp_path: Path) -> None:
    names = ["zeta", "alpha", "mid"]
    definitions = read_config(write(tmp_path, graphs(*({"name": name} for name in names))))
    assert [definition.name for definition in definitions] == names


def test_graph_edits_change_the_definition(tmp_path: Path) -> None:
    # A reload must notice an edited graph.pbtxt even when config.json did not change.
    path = write(tmp_path, graphs({"name": "a"}))
    (tmp_path / "a").mkdir()
    graph = tmp_path / "a" / "graph.pbtxt"
    graph.write_text('input_stream: "in"\n', encoding="utf-8")
    first = read_config(path)
    assert read_config(path) == first
    graph.write_text('input_stream: "other"\n', encoding="utf-8")
    assert read_config(path) != first


def test_subgraph_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    path = write(tmp_path, graphs({"name": "a", "subgraph_paths": ["lib", "/abs/more"]}))
    (definition,) = read_config(path)
    assert isinstance(definition, GraphDefinition)
    assert definition.subgraph_paths == ((tmp_path / "lib").resolve(), Path("/abs/more"))


@pytest.mark.parametrize("value", ["lib", [1], {"a": "b"}])
def test_subgraph_paths_must_be_a_list_of_strings(tmp_path: Path, value: Any) -> None:
    assert_error(
        tmp_path,
        graphs({"name": "a", "subgraph_paths": value}),
        "mediapipe_config_list[0].subgraph_paths must be an array of strings",
    )


def test_subgraph_file_edits_change_the_definition(tmp_path: Path) -> None:
    # A reload must notice an edited subgraph, in the graph's directory or on its path.
    path = write(tmp_path, graphs({"name": "a", "subgraph_paths": ["lib"]}))
    for directory in ("a", "lib"):
        (tmp_path / directory).mkdir()
    (tmp_path / "a" / "graph.pbtxt").write_text('node { calculator: "Sub" }', encoding="utf-8")
    first = read_config(path)
    assert read_config(path) == first
    (tmp_path / "lib" / "sub.pbtxt").write_text('type: "Sub"', encoding="utf-8")
    second = read_config(path)
    assert second != first
    (tmp_path / "a" / "local.pbtxt").write_text('type: "Local"', encoding="utf-8")
    assert read_config(path) != second


@pytest.mark.parametrize("layout", ["", "1/"])
def test_a_model_entry_holding_graph_pbtxt_is_a_graph(tmp_path: Path, layout: str) -> None:
    """OVMS's pull mode and --add_to_config list generative models in model_config_list."""
    base = tmp_path / "OpenVINO" / "Qwen3-8B-int4-ov"
    (base / layout).mkdir(parents=True)
    (base / layout / "graph.pbtxt").write_text('input_stream: "in"', encoding="utf-8")
    entry = {"config": {"name": "qwen", "base_path": "OpenVINO/Qwen3-8B-int4-ov"}}
    (definition,) = read_config(write(tmp_path, {"model_config_list": [entry]}))
    assert isinstance(definition, GraphDefinition)
    assert definition.name == "qwen"
    assert definition.graph_path == (base / layout / "graph.pbtxt").resolve()


def test_a_subconfig_may_not_list_a_graph(tmp_path: Path) -> None:
    (tmp_path / "a" / "inner").mkdir(parents=True)
    (tmp_path / "a" / "inner" / "graph.pbtxt").write_text("", encoding="utf-8")
    sub = {"model_config_list": [{"config": {"name": "inner", "base_path": "inner"}}]}
    write(tmp_path / "a", sub, "subconfig.json")
    (graph,) = read_config(write(tmp_path, graphs({"name": "a"})))
    assert isinstance(graph, GraphDefinition) and graph.problem is not None
    assert "'inner' is a graph" in graph.problem
