"""OVMS's command lines: no subcommand means serve; the modes' flags and their conflicts;
config management on a repository (docs/starting_server.md's example)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrt.cli.main import main, with_command


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--rest_port", "8000"], ["serve", "--rest_port", "8000"]),
        (["--log_level", "DEBUG", "serve"], ["--log_level", "DEBUG", "serve"]),
        (["--log_level", "DEBUG", "--pull"], ["serve", "--log_level", "DEBUG", "--pull"]),
        (["graph", "show", "x"], ["graph", "show", "x"]),
        (["--help"], ["--help"]),
        ([], []),
    ],
)
def test_flags_without_a_subcommand_mean_serve(argv: list[str], expected: list[str]) -> None:
    assert with_command(argv) == expected


def repository(root: Path) -> Path:
    """docs/starting_server.md's example repository."""
    for graph in ("meta/llama4", "meta/llama3.1", "llama3.2"):
        (root / graph).mkdir(parents=True)
        (root / graph / "graph.pbtxt").write_text("")
    (root / "resnet" / "1").mkdir(parents=True)
    (root / "resnet" / "1" / "model.xml").write_text("")
    (root / "empty" / "1").mkdir(parents=True)
    return root


def test_list_models_prints_ovms_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = repository(tmp_path / "models")
    assert main(["--list_models", "--model_repository_path", str(root)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "llama3.2",
        "meta/llama3.1",
        "meta/llama4",
        "resnet",
    ]


def test_add_and_remove_edit_model_config_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repository(tmp_path / "models")
    config = root / "config.json"
    add = ["--add_to_config", "--config_path", str(config), "--model_repository_path", str(root)]
    assert main([*add, "--model_name", "llama3.2"]) == 0
    assert main([*add, "--model_name", "resnet", "--nireq", "2", "--shape", '{"x": "(1,3)"}']) == 0
    assert json.loads(config.read_text()) == {
        "model_config_list": [
            {"config": {"name": "llama3.2", "base_path": "llama3.2"}},
            {
                "config": {
                    "name": "resnet",
                    "base_path": "resnet",
                    "shape": {"x": "(1,3)"},
                    "nireq": 2,
                }
            },
        ]
    }
    assert main([*add, "--model_name", "llama3.2"]) == 1  # the name is taken
    monkeypatch.setenv("OVMS_MODEL_REPOSITORY_PATH", str(root))  # the default config.json
    assert main(["--remove_from_config", "--model_name", "llama3.2"]) == 0
    assert [e["config"]["name"] for e in json.loads(config.read_text())["model_config_list"]] == [
        "resnet"
    ]
    assert main(["--remove_from_config", "--model_name", "llama3.2"]) == 1
    assert "Config updated" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--list_models", "--task", "embeddings"], "--list_models cannot be used with --pull"),
        (["--configure"], "--configure requires --model_path"),
        (["--pull"], "--pull requires --source_model"),
        (["--remove_from_config", "--model_path", "x"], "--model_path cannot be used with"),
    ],
)
def test_modes_that_do_not_go_together_are_refused(
    argv: list[str], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert main(argv) == 1
    assert message in caplog.text


def test_configure_writes_the_graph_for_a_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "llm"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    assert main(["--configure", "--model_path", str(model), "--max_num_seqs", "9"]) == 0
    graph = (model / "graph.pbtxt").read_text()
    assert 'models_path: "./"' in graph and "max_num_seqs: 9" in graph
