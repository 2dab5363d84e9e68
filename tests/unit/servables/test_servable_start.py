"""When the LLM servable's frontend loads its tokenizer: beside the engine's load when it can.

The engine process takes seconds to compile; the frontend's tokenizer, chat template and token
texts take seconds of their own. Loading them one after the other made every server start wait
for both. These tests replace the engine process and the frontend load with stand-ins that
record their order (the real ones run in every end-to-end test).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from servables.errors import ServableLoadError
from servables.llm.engine.messages import Ready
from servables.llm.model_files import (
    TOKENIZER_FILES,
    converted_tokenizer,
    file_key,
    tokenizer_location,
)
from servables.llm.servable import LLMServable, LLMServableConfig, ServableState

TINY_VLM = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "tiny-qwen2-vl"


class Recorder:
    """Stands in for the engine's start and the frontend's load, noting what happened when."""

    def __init__(self, tokenizer_path: Path, engine_waits_for_frontend: bool) -> None:
        self.events: list[str] = []
        self.tokenizer_path = tokenizer_path
        self.engine_waits_for_frontend = engine_waits_for_frontend
        self.frontend_loaded = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.loaded_from: Path | None = None

    async def start_engine(self) -> Ready:
        self.events.append("engine starts")
        if self.engine_waits_for_frontend:  # a slow compile: the frontend finishes first
            await asyncio.wait_for(self.frontend_loaded.wait(), timeout=5)
        self.events.append("engine ready")
        return Ready(1.0, 2, str(self.tokenizer_path))

    def load_frontend(self, path: Path) -> None:
        self.events.append("frontend loads")
        self.loaded_from = path
        self.loop.call_soon_threadsafe(self.frontend_loaded.set)


def servable_with(monkeypatch: pytest.MonkeyPatch, models_path: Path, recorder: Recorder) -> Any:
    servable = LLMServable(LLMServableConfig(name="m", models_path=models_path))
    monkeypatch.setattr(servable.engine, "start", recorder.start_engine)
    monkeypatch.setattr(servable, "_load_tokenizer", recorder.load_frontend)
    return servable


async def test_a_model_directory_loads_the_frontend_while_the_engine_compiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder(TINY_VLM, engine_waits_for_frontend=True)
    servable = servable_with(monkeypatch, TINY_VLM, recorder)
    await servable.start()
    assert recorder.events.index("frontend loads") < recorder.events.index("engine ready")
    assert recorder.loaded_from == TINY_VLM
    assert servable.state is ServableState.AVAILABLE


async def test_a_gguf_whose_tokenizer_is_not_converted_waits_for_the_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, smollm2_gguf: Path
) -> None:
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path / "cache"))  # nothing converted yet
    gguf = smollm2_gguf
    assert converted_tokenizer(gguf) is None
    converted_by_engine = tmp_path / "converted"
    recorder = Recorder(converted_by_engine, engine_waits_for_frontend=False)
    servable = servable_with(monkeypatch, gguf, recorder)
    await servable.start()
    assert recorder.events == ["engine starts", "engine ready", "frontend loads"]
    assert recorder.loaded_from == converted_by_engine


def test_a_gguf_converted_before_is_found_without_the_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    target = tmp_path / "tokenizers" / file_key(gguf)
    target.mkdir(parents=True)
    for name in TOKENIZER_FILES[:-1]:
        (target / name).write_bytes(b"")
    assert converted_tokenizer(gguf) is None  # one file missing: still to be converted
    (target / TOKENIZER_FILES[-1]).write_bytes(b"")
    assert converted_tokenizer(gguf) == target
    assert converted_tokenizer(TINY_VLM) == TINY_VLM


async def test_an_engine_that_fails_waits_for_the_frontend_load_then_fails_the_servable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder(TINY_VLM, engine_waits_for_frontend=False)
    servable = servable_with(monkeypatch, TINY_VLM, recorder)

    async def failing_engine() -> Ready:
        await asyncio.wait_for(recorder.frontend_loaded.wait(), timeout=5)
        raise ServableLoadError("m: the engine could not load the model")

    monkeypatch.setattr(servable.engine, "start", failing_engine)
    with pytest.raises(ServableLoadError, match="could not load"):
        await servable.start()
    assert recorder.events == ["frontend loads"]
    assert servable.state is ServableState.UNAVAILABLE


def test_a_gguf_tokenizer_saved_with_genais_graph_is_copied_not_converted_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The engine saves genai's graph of a new GGUF with its tokenizer IRs; converting the
    vocabulary again for the frontend took ~3 s more of every first load."""
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF not a model: a conversion would fail")
    saved = tmp_path / "saved"
    saved.mkdir()
    stems = [name.removesuffix(".xml") for name in TOKENIZER_FILES]
    for stem in stems:
        for ext in ("xml", "bin"):
            (saved / f"{stem}.{ext}").write_text(f"{stem}.{ext}")
    found = tokenizer_location(gguf, saved)
    assert found == converted_tokenizer(gguf) == tmp_path / "cache" / "tokenizers" / file_key(gguf)
    for stem in stems:
        for ext in ("xml", "bin"):
            assert (found / f"{stem}.{ext}").read_text() == f"{stem}.{ext}"
    assert sorted(path.name for path in found.iterdir()) == sorted(
        f"{stem}.{ext}" for stem in stems for ext in ("xml", "bin")
    )
