"""servables.llm.gguf_graph: the cache of GGUF graphs — one directory per file and genai version,
made once, and pruned of the directories whose file is gone or changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from servables.llm import gguf_graph
from servables.llm.gguf_graph import MODEL_XML, cached_model_dir


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Maker:
    """A stand-in for saving genai's graph: counts its calls."""

    def __init__(self) -> None:
        self.calls: list[Path] = []

    def __call__(self, source: Path, directory: Path) -> None:
        self.calls.append(source)
        (directory / MODEL_XML).write_text(source.read_text())


def gguf(tmp_path: Path, name: str, text: str = "weights") -> Path:
    path = tmp_path / "models" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_made_once_per_file(tmp_path: Path) -> None:
    make = Maker()
    first = gguf(tmp_path, "a.gguf")
    made = cached_model_dir(first, "gguf-test", make)
    assert cached_model_dir(first, "gguf-test", make) == made
    assert make.calls == [first] and (made / MODEL_XML).read_text() == "weights"
    assert (made / gguf_graph.SOURCE).read_text().split("\n")[0] == str(first.resolve())


def test_a_changed_file_is_made_again_and_its_old_directory_removed(tmp_path: Path) -> None:
    make = Maker()
    path = gguf(tmp_path, "a.gguf")
    old = cached_model_dir(path, "gguf-test", make)
    path.write_text("new weights, longer")
    os.utime(path, ns=(1, 1))
    new = cached_model_dir(path, "gguf-test", make)
    assert new != old and not old.exists()
    assert (new / MODEL_XML).read_text() == "new weights, longer"


def test_directories_of_deleted_files_go_and_others_stay(tmp_path: Path, cache: Path) -> None:
    make = Maker()
    kept, deleted = gguf(tmp_path, "kept.gguf"), gguf(tmp_path, "deleted.gguf")
    kept_dir = cached_model_dir(kept, "gguf-test", make)
    deleted_dir = cached_model_dir(deleted, "gguf-test", make)
    unlabeled = cache / "gguf-test" / "from-an-older-graphrt"
    unlabeled.mkdir()
    deleted.unlink()
    cached_model_dir(gguf(tmp_path, "third.gguf"), "gguf-test", make)
    assert kept_dir.is_dir() and not deleted_dir.exists() and not unlabeled.exists()


def test_another_genai_version_makes_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make = Maker()
    path = gguf(tmp_path, "a.gguf")
    old = cached_model_dir(path, "gguf-test", make)
    monkeypatch.setattr(gguf_graph, "_genai_version", lambda: "2099.1.0")
    new = cached_model_dir(path, "gguf-test", make)
    assert new != old and len(make.calls) == 2 and not old.exists()


def test_a_failed_make_leaves_nothing(tmp_path: Path, cache: Path) -> None:
    def failing(source: Path, directory: Path) -> None:
        (directory / "half").write_text("x")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cached_model_dir(gguf(tmp_path, "a.gguf"), "gguf-test", failing)
    assert [p.name for p in (cache / "gguf-test").iterdir() if p.suffix != ".lock"] == []


def test_the_engine_loads_the_saved_graph_or_else_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache that cannot take the graph (read-only, full) must not stop the model loading."""
    from servables.llm.engine import pipeline

    path = gguf(tmp_path, "a.gguf")
    monkeypatch.setattr(pipeline, "genai_model_dir", lambda source: tmp_path / "saved")
    assert pipeline._loadable(path) == tmp_path / "saved"

    def unwritable(source: Path) -> Path:
        raise OSError("read-only file system")

    monkeypatch.setattr(pipeline, "genai_model_dir", unwritable)
    assert pipeline._loadable(path) == path
    model_dir = tmp_path / "ir_model"
    assert pipeline._loadable(model_dir) == model_dir  # not a GGUF: as it is
