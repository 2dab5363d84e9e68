"""`graphrt export` directory handling: a failed export keeps the model that was there, an
overwrite swaps the new one in only on success, and model names stay inside the repository.
The conversion itself (optimum-cli, in the export venv) is faked at module level."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from graphrt.export import text_tasks as export
from graphrt.export.text_graphs import RerankSettings, TextGenerationSettings
from graphrt.export.text_tasks import ExportError, ExportRequest


def request(
    repository: Path, source: str, name: str | None, *, overwrite: bool = False, llm: bool = False
) -> ExportRequest:
    return ExportRequest(
        source_model=source,
        model_repository_path=repository,
        config_file_path=repository / "config.json",
        model_name=name,
        weight_format="int8",
        graph=TextGenerationSettings(models_path="") if llm else RerankSettings(models_path=""),
        overwrite_models=overwrite,
    )


def old_model(repository: Path, name: str = "m") -> Path:
    model_dir = repository / name
    model_dir.mkdir(parents=True)
    (model_dir / "graph.pbtxt").write_text("old graph", encoding="utf-8")
    (model_dir / "openvino_model.bin").write_bytes(b"old weights")
    return model_dir


def ir_source(tmp_path: Path) -> Path:
    source = tmp_path / "source-ir"
    source.mkdir()
    (source / "openvino_model.xml").write_text("<net/>", encoding="utf-8")
    (source / "openvino_model.bin").write_bytes(b"new weights")
    return source


def leftovers(repository: Path) -> list[str]:
    return sorted(p.name for p in repository.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("llm", [False, True])
def test_a_failed_overwrite_keeps_the_old_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: bool
) -> None:
    repository = tmp_path / "repo"
    model_dir = old_model(repository)

    def fail(
        source: str, target: Path, weight_format: str, task: str, extra: Sequence[str] = ()
    ) -> None:
        (target / "openvino_model.xml").write_text("half written", encoding="utf-8")
        raise ExportError("optimum-cli failed with exit code 1")

    monkeypatch.setattr(export, "convert_hf", fail)
    exported = request(repository, "org/missing-model", "m", overwrite=True, llm=llm)
    with pytest.raises(ExportError, match="optimum-cli failed"):
        if llm:
            export.export_text_generation(exported)
        else:
            export.export_encoder(exported, "rerank_ov")
    assert (model_dir / "graph.pbtxt").read_text(encoding="utf-8") == "old graph"
    assert (model_dir / "openvino_model.bin").read_bytes() == b"old weights"
    assert not (model_dir / "openvino_model.xml").exists()
    assert leftovers(repository) == []
    assert not (repository / "config.json").exists()


def test_a_successful_overwrite_replaces_the_model(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    model_dir = old_model(repository)
    (model_dir / "stale.txt").write_text("from the old export", encoding="utf-8")
    source = ir_source(tmp_path)
    exported = request(repository, str(source), "m", overwrite=True)
    assert export.export_encoder(exported, "rerank_ov") == model_dir
    assert (model_dir / "openvino_model.bin").read_bytes() == b"new weights"
    assert "RerankCalculatorOV" in (model_dir / "graph.pbtxt").read_text(encoding="utf-8")
    assert not (model_dir / "stale.txt").exists()
    assert leftovers(repository) == []
    assert '"base_path": "m"' in (repository / "config.json").read_text(encoding="utf-8")


def test_an_existing_model_is_kept_without_overwrite(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    model_dir = old_model(repository)
    with pytest.raises(ExportError, match="--overwrite_models"):
        export.export_encoder(request(repository, str(ir_source(tmp_path)), "m"), "rerank_ov")
    assert (model_dir / "openvino_model.bin").read_bytes() == b"old weights"


def test_nested_names_are_allowed(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    source = ir_source(tmp_path)
    model_dir = export.export_encoder(request(repository, str(source), "org/model"), "rerank_ov")
    assert model_dir == repository / "org" / "model"
    assert (model_dir / "graph.pbtxt").is_file()


@pytest.mark.parametrize("name", ["../escaped", "a/../../escaped", "ABSOLUTE", ".", " "])
def test_names_outside_the_repository_are_refused(tmp_path: Path, name: str) -> None:
    repository = tmp_path / "repo"
    name = str(tmp_path / "escaped") if name == "ABSOLUTE" else name
    old_model(repository)  # overwriting "." would have removed the whole repository
    with pytest.raises(ExportError, match="model name"):
        export.export_encoder(
            request(repository, str(ir_source(tmp_path)), name, overwrite=True), "rerank_ov"
        )
    assert (repository / "m" / "graph.pbtxt").is_file()
    assert not (tmp_path / "escaped").exists()


def test_a_source_name_that_escapes_is_refused(tmp_path: Path) -> None:
    """Without --model_name, a Hugging Face id is the name: it must not escape either."""
    with pytest.raises(ExportError, match="model name"):
        export.export_encoder(
            request(tmp_path / "repo", "../../graphrt-no-such-model", None), "rerank_ov"
        )


def test_a_symbolic_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    repository.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (repository / "link").symlink_to(outside)
    with pytest.raises(ExportError, match="outside the model repository"):
        export.export_encoder(request(repository, str(ir_source(tmp_path)), "link/m"), "rerank_ov")
    assert list(outside.iterdir()) == []


def test_extra_quantization_params_reach_optimum_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """export_model.py's --extra_quantization_params: int4 channel-wise, every layer."""
    commands: list[list[str]] = []

    class Finished:
        returncode = 0

    def run(command: list[str], check: bool) -> Finished:
        commands.append(command)
        (Path(command[-1]) / "openvino_model.xml").write_text("<net/>", encoding="utf-8")
        return Finished()

    monkeypatch.setattr(export.shutil, "which", lambda name: f"/bin/{name}")
    monkeypatch.setattr(export.subprocess, "run", run)
    extra = ("--sym", "--group-size", "-1", "--ratio", "1.0", "--all-layers")
    given = request(tmp_path / "repo", "org/model", "m", llm=True)
    given.weight_format = "int4"
    given.extra_quantization_params = extra
    export.export_text_generation(given)
    (command,) = commands
    assert command[command.index("--weight-format") + 1] == "int4"
    assert tuple(command[-1 - len(extra) : -1]) == extra
