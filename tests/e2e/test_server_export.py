"""`graphrt export text_generation` then `graphrt serve --config_path`, end to end, as a user
would run them: the export writes the model directory, its graph.pbtxt and the config.json entry;
the server serves the result; exporting again refuses to overwrite unless told to."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import LaunchExact

Run = Callable[..., subprocess.CompletedProcess[str]]
ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]


def export_args(gguf: Path, *extra: str) -> list[str]:
    return [
        "export",
        "text_generation",
        "--source_model",
        str(gguf),
        "--model_repository_path",
        "models",
        "--config_file_path",
        "models/config.json",
        "--model_name",
        "exported",
        *extra,
    ]


def test_export_then_serve(
    tiny_llm_gguf: Path, tmp_path: Path, run_graphrt: Run, launch_exact: LaunchExact
) -> None:
    result = run_graphrt(*export_args(tiny_llm_gguf), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    model_dir = tmp_path / "models" / "exported"
    assert (model_dir / tiny_llm_gguf.name).stat().st_size == tiny_llm_gguf.stat().st_size
    graph = model_dir / "graph.pbtxt"
    assert graph.is_file()
    graph_text = graph.read_text(encoding="utf-8")
    assert "HttpLLMCalculator" in graph_text
    assert tiny_llm_gguf.name in graph_text
    assert str(tmp_path) not in graph_text  # models_path is relative: the folder can move
    validated = run_graphrt("graph", "validate", str(graph), cwd=tmp_path)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    config_path = tmp_path / "models" / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    assert config["model_config_list"] == []
    (entry,) = config["mediapipe_config_list"]
    assert entry["name"] == "exported"
    assert (config_path.parent / entry.get("base_path", "exported")).resolve() == model_dir

    with launch_exact(["--config_path", str(config_path)], model="exported") as server:
        with server.client() as sdk:
            assert [model.id for model in sdk.models.list()] == ["exported"]
            reply = sdk.chat.completions.create(model="exported", messages=ITALY, max_tokens=8)
        assert reply.model == "exported"
        assert reply.choices[0].message.content


def test_export_refuses_to_overwrite(tiny_llm_gguf: Path, tmp_path: Path, run_graphrt: Run) -> None:
    first = run_graphrt(*export_args(tiny_llm_gguf), cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    config_path = tmp_path / "models" / "config.json"
    graph = tmp_path / "models" / "exported" / "graph.pbtxt"
    graph.write_text(graph.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")

    again = run_graphrt(*export_args(tiny_llm_gguf), cwd=tmp_path)
    output = again.stdout + again.stderr
    assert again.returncode == 1, output
    assert "exported" in output
    assert "--overwrite_models" in output
    assert "Traceback" not in output
    assert graph.read_text(encoding="utf-8").endswith("# edited\n")  # untouched

    forced = run_graphrt(*export_args(tiny_llm_gguf, "--overwrite_models"), cwd=tmp_path)
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert not graph.read_text(encoding="utf-8").endswith("# edited\n")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    assert [entry["name"] for entry in config["mediapipe_config_list"]] == ["exported"]
