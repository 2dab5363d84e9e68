"""model_files: models_path resolution, pipeline type inference, context length, defaults.

GGUF headers are written by hand here (little-endian: magic, version, tensor count, key/value
count, then key/type/value triples) so that every value type the reader skips is exercised; the
real SmolLM2 GGUF checks the reader against a file llama.cpp wrote.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from servables.errors import ServableLoadError
from servables.hf_config import MAX_LENGTH_FIELDS
from servables.llm.model_files import (
    OMNI_MARKER,
    VLM_MARKERS,
    PipelineType,
    generation_defaults,
    gguf_metadata,
    has_vlm_files,
    infer_pipeline_type,
    is_gguf,
    max_model_length,
    openable_gguf,
    resolve_models_path,
    vocabulary_size,
)

# ------------------------------------------------------------------------------- GGUF writing

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL = 0, 1, 2, 3, 4, 5, 6, 7
STRING, ARRAY, UINT64, INT64, FLOAT64 = 8, 9, 10, 11, 12
FORMATS = {
    UINT8: "<B",
    INT8: "<b",
    UINT16: "<H",
    INT16: "<h",
    UINT32: "<I",
    INT32: "<i",
    FLOAT32: "<f",
    BOOL: "<?",
    UINT64: "<Q",
    INT64: "<q",
    FLOAT64: "<d",
}


def gguf_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def gguf_value(kind: int, value: Any) -> bytes:
    if kind == STRING:
        return gguf_string(value)
    if kind == ARRAY:
        item_kind, items = value
        body = b"".join(gguf_value(item_kind, item) for item in items)
        return struct.pack("<IQ", item_kind, len(items)) + body
    return struct.pack(FORMATS[kind], value)


def write_gguf(
    path: Path, pairs: list[tuple[str, int, Any]], *, version: int = 3, magic: bytes = b"GGUF"
) -> Path:
    data = magic + struct.pack("<IQQ", version, 0, len(pairs))
    for key, kind, value in pairs:
        data += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    path.write_bytes(data + b"\0" * 32)  # tensor info would follow
    return path


# Every value type before the wanted keys, so the reader has to skip each of them correctly.
ALL_TYPES = [
    ("general.name", STRING, "Tiny Model"),
    ("u8", UINT8, 200),
    ("i8", INT8, -5),
    ("u16", UINT16, 60000),
    ("i16", INT16, -3),
    ("u32", UINT32, 7),
    ("i32", INT32, -7),
    ("f32", FLOAT32, 0.5),
    ("flag", BOOL, True),
    ("u64", UINT64, 2**40),
    ("i64", INT64, -(2**40)),
    ("f64", FLOAT64, 1.25),
    ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<s>", "</s>", "héllo", ""])),
    ("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0, -1.0, -2.0])),
    ("tokenizer.ggml.token_type", ARRAY, (INT32, [1, 3, 1])),
    ("nested", ARRAY, (ARRAY, [(UINT8, [1, 2]), (STRING, ["a", "bc"])])),
    ("empty", ARRAY, (STRING, [])),
]


def tiny_gguf(path: Path, context_length: Any = 2048, kind: int = UINT32) -> Path:
    pairs = [*ALL_TYPES, ("general.architecture", STRING, "llama")]
    if context_length is not None:
        pairs.append(("llama.context_length", kind, context_length))
    pairs.append(("llama.block_count", UINT32, 30))
    return write_gguf(path, pairs)


# --------------------------------------------------------------------------------- GGUF reading


def test_gguf_metadata_skips_every_type(tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "tiny.gguf")
    wanted = {"general.architecture", "llama.context_length", "llama.block_count"}
    assert gguf_metadata(path, wanted) == {
        "general.architecture": "llama",
        "llama.context_length": 2048,
        "llama.block_count": 30,
    }


def test_gguf_metadata_reads_scalars_and_strings(tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "tiny.gguf")
    found = gguf_metadata(path, {"general.name", "i16", "u64", "f64", "flag", "i8"})
    assert found == {
        "general.name": "Tiny Model",
        "i16": -3,
        "u64": 2**40,
        "f64": 1.25,
        "flag": True,
        "i8": -5,
    }


def test_gguf_metadata_arrays_give_their_length(tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "tiny.gguf")
    found = gguf_metadata(path, {"tokenizer.ggml.tokens", "nested", "llama.block_count"})
    assert found == {"tokenizer.ggml.tokens": 4, "nested": 2, "llama.block_count": 30}


def test_vocabulary_size_from_gguf_tokens_or_config(tmp_path: Path) -> None:
    assert vocabulary_size(tiny_gguf(tmp_path / "tiny.gguf")) == 4
    model = tmp_path / "model"
    model.mkdir()
    assert vocabulary_size(model) is None
    (model / "config.json").write_text('{"text_config": {"vocab_size": 151936}}')
    assert vocabulary_size(model) == 151936


def test_gguf_metadata_missing_keys(tmp_path: Path) -> None:
    path = tiny_gguf(tmp_path / "tiny.gguf")
    assert gguf_metadata(path, {"nope"}) == {}


def test_gguf_version_2_is_read(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "v2.gguf", [("general.architecture", STRING, "qwen2")], version=2)
    assert gguf_metadata(path, {"general.architecture"}) == {"general.architecture": "qwen2"}


def test_not_a_gguf_file(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "bad.gguf", [], magic=b"GGML")
    with pytest.raises(ValueError, match="is not a GGUF file"):
        gguf_metadata(path, {"x"})


def test_gguf_version_1_is_refused(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "v1.gguf", [], version=1)
    with pytest.raises(ValueError, match="GGUF version 1 is not supported"):
        gguf_metadata(path, {"x"})


def test_truncated_gguf(tmp_path: Path) -> None:
    path = tmp_path / "short.gguf"
    full = write_gguf(tmp_path / "full.gguf", [("general.architecture", STRING, "llama")])
    path.write_bytes(full.read_bytes()[:30])
    with pytest.raises(ValueError, match="truncated GGUF header"):
        gguf_metadata(path, {"general.architecture"})


def test_unknown_gguf_value_type(tmp_path: Path) -> None:
    path = tmp_path / "odd.gguf"
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gguf_string("k") + struct.pack("<I", 99)
    path.write_bytes(data + b"\0" * 16)
    with pytest.raises(ValueError, match="unknown GGUF value type 99"):
        gguf_metadata(path, {"other"})


# ------------------------------------------------------------------------------ max_model_length


@pytest.mark.parametrize("kind", [UINT32, UINT64, INT32])
def test_max_model_length_from_hand_made_gguf(tmp_path: Path, kind: int) -> None:
    assert max_model_length(tiny_gguf(tmp_path / "tiny.gguf", 2048, kind)) == 2048


def test_max_model_length_gguf_without_context_length(tmp_path: Path) -> None:
    assert max_model_length(tiny_gguf(tmp_path / "tiny.gguf", None)) is None
    assert max_model_length(tiny_gguf(tmp_path / "f.gguf", 2048.0, FLOAT32)) is None


@pytest.mark.parametrize(
    "content",
    [b"", b"GGU", b"GGML" + bytes(40), b"GGUF" + bytes(6)],
    ids=["empty", "short", "not-gguf", "version-0"],
)
def test_unreadable_gguf_is_a_load_error(tmp_path: Path, content: bytes) -> None:
    # Expected behaviour: a broken .gguf (empty, truncated download, not GGUF) is a
    # ServableLoadError naming the file, which marks the servable UNAVAILABLE with the reason.
    # A bare ValueError escapes GraphServable.load(), which catches only GraphError,
    # ServableError and OSError.
    path = tmp_path / "x.gguf"
    path.write_bytes(content)
    with pytest.raises(ServableLoadError) as info:
        max_model_length(path)
    assert str(path) in info.value.message


def test_max_model_length_gguf_without_architecture(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "a.gguf", [("llama.context_length", UINT32, 4096)])
    assert max_model_length(path) is None


def test_max_model_length_from_real_gguf(smollm2_gguf: Path) -> None:
    assert gguf_metadata(smollm2_gguf, {"general.architecture"}) == {
        "general.architecture": "llama"
    }
    assert max_model_length(smollm2_gguf) == 8192


def write_config(model_dir: Path, config: Any) -> Path:
    (model_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return model_dir


def test_max_length_fields_order_matches_ovms() -> None:
    assert MAX_LENGTH_FIELDS == (
        "max_position_embeddings",
        "n_positions",
        "seq_len",
        "seq_length",
        "n_ctx",
        "sliding_window",
    )


@pytest.mark.parametrize("position", range(len(MAX_LENGTH_FIELDS)))
def test_max_model_length_field_order(tmp_path: Path, position: int) -> None:
    # Every later field is present too (in reverse order in the file): the earliest one wins.
    config = {name: 1000 + i for i, name in reversed(list(enumerate(MAX_LENGTH_FIELDS)))}
    for name in MAX_LENGTH_FIELDS[:position]:
        del config[name]
    assert max_model_length(write_config(tmp_path, config)) == 1000 + position


def test_max_model_length_nested_configs(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "text_config": {"max_position_embeddings": 32768},
        "llm_config": {"max_position_embeddings": 4096},
    }
    assert max_model_length(write_config(tmp_path, config)) == 32768
    del config["text_config"]
    assert max_model_length(write_config(tmp_path, config)) == 4096
    config["n_ctx"] = 512  # a top-level field wins over nested configs
    assert max_model_length(write_config(tmp_path, config)) == 512


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"max_position_embeddings": 0},
        {"max_position_embeddings": -1},
        {"max_position_embeddings": True},
        {"max_position_embeddings": "4096"},
        {"max_position_embeddings": 4096.0},
        {"text_config": None, "llm_config": [1]},
        [4096],
    ],
)
def test_max_model_length_unusable_values(tmp_path: Path, config: Any) -> None:
    assert max_model_length(write_config(tmp_path, config)) is None


def test_max_model_length_skips_invalid_values_for_later_fields(tmp_path: Path) -> None:
    config = {"max_position_embeddings": None, "n_positions": 0, "seq_len": 777}
    assert max_model_length(write_config(tmp_path, config)) == 777


def test_max_model_length_without_or_with_broken_config(tmp_path: Path) -> None:
    assert max_model_length(tmp_path) is None
    (tmp_path / "config.json").write_text("{broken", encoding="utf-8")
    assert max_model_length(tmp_path) is None


# -------------------------------------------------------------------------- generation defaults


def test_generation_defaults(tmp_path: Path) -> None:
    config = {"temperature": 0.6, "top_p": 0.9, "do_sample": True, "eos_token_id": [1, 2]}
    (tmp_path / "generation_config.json").write_text(json.dumps(config), encoding="utf-8")
    assert generation_defaults(tmp_path) == config


@pytest.mark.parametrize("content", [None, "{broken", "[1]"])
def test_generation_defaults_missing_or_unusable(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "generation_config.json").write_text(content, encoding="utf-8")
    assert generation_defaults(tmp_path) == {}


def test_generation_defaults_of_a_gguf_file(tmp_path: Path) -> None:
    (tmp_path / "generation_config.json").write_text('{"temperature": 1}', encoding="utf-8")
    assert generation_defaults(tiny_gguf(tmp_path / "m.gguf")) == {}


# --------------------------------------------------------------------------- resolve_models_path


def test_relative_path_is_resolved_against_the_graph_dir(tmp_path: Path) -> None:
    graph_dir = tmp_path / "graphs" / "llm"
    (tmp_path / "models" / "smol").mkdir(parents=True)
    graph_dir.mkdir(parents=True)
    resolved = resolve_models_path("../../models/smol", graph_dir)
    assert resolved == (tmp_path / "models" / "smol").resolve()
    assert resolved.is_absolute()
    assert resolve_models_path("./", graph_dir) == graph_dir.resolve()


def test_absolute_path_is_kept(tmp_path: Path) -> None:
    model = tiny_gguf(tmp_path / "m.gguf")
    assert resolve_models_path(str(model), tmp_path / "elsewhere") == model.resolve()


def test_gguf_file_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "Model.GGUF").write_bytes(b"")
    assert resolve_models_path("Model.GGUF", tmp_path) == (tmp_path / "Model.GGUF").resolve()


def test_empty_models_path(tmp_path: Path) -> None:
    with pytest.raises(ServableLoadError) as info:
        resolve_models_path("", tmp_path)
    assert info.value.message == "LLM node models_path is empty"
    assert info.value.param == "models_path"


def test_missing_models_path(tmp_path: Path) -> None:
    with pytest.raises(ServableLoadError) as info:
        resolve_models_path("nope", tmp_path)
    missing = tmp_path.resolve() / "nope"
    assert info.value.message == f"LLM node models_path: {missing} does not exist"
    assert info.value.param == "models_path"


def test_models_path_neither_dir_nor_gguf(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"")
    with pytest.raises(ServableLoadError) as info:
        resolve_models_path("model.bin", tmp_path)
    path = (tmp_path / "model.bin").resolve()
    expected = f"LLM node models_path: {path} is not a directory nor GGUF file"
    assert info.value.message == expected
    assert info.value.param == "models_path"


def test_is_gguf(tmp_path: Path) -> None:
    (tmp_path / "a.gguf").write_bytes(b"")
    (tmp_path / "dir.gguf").mkdir()
    assert is_gguf(tmp_path / "a.gguf")
    assert not is_gguf(tmp_path / "dir.gguf")
    assert not is_gguf(tmp_path / "missing.gguf")


# ----------------------------------------------------------------------- pipeline type inference


@pytest.fixture
def text_dir(tmp_path: Path) -> Path:
    path = tmp_path / "text"
    path.mkdir()
    (path / "openvino_model.xml").write_text("<net/>", encoding="utf-8")
    return path


@pytest.fixture
def vlm_dir(tmp_path: Path) -> Path:
    path = tmp_path / "vlm"
    path.mkdir()
    for name in ("openvino_language_model.xml", *VLM_MARKERS):
        (path / name).write_text("<net/>", encoding="utf-8")
    return path


@pytest.fixture
def gguf_file(tmp_path: Path) -> Path:
    return tiny_gguf(tmp_path / "model.gguf")


AUTO = PipelineType.AUTO


@pytest.mark.parametrize(
    ("model", "device", "expected"),
    [
        ("gguf_file", "CPU", PipelineType.LM_CB),
        ("gguf_file", "GPU", PipelineType.LM_CB),
        ("gguf_file", "NPU", PipelineType.LM),
        ("text_dir", "CPU", PipelineType.LM_CB),
        ("text_dir", "GPU.1", PipelineType.LM_CB),
        ("text_dir", "NPU", PipelineType.LM),
        ("vlm_dir", "CPU", PipelineType.VLM_CB),
        ("vlm_dir", "NPU", PipelineType.VLM),
    ],
)
def test_auto_inference(
    request: pytest.FixtureRequest, model: str, device: str, expected: PipelineType
) -> None:
    path: Path = request.getfixturevalue(model)
    assert infer_pipeline_type(path, device, AUTO) is expected


@pytest.mark.parametrize("marker", VLM_MARKERS)
def test_one_vlm_marker_is_not_a_vlm(text_dir: Path, marker: str) -> None:
    (text_dir / marker).write_text("<net/>", encoding="utf-8")
    assert not has_vlm_files(text_dir)
    assert infer_pipeline_type(text_dir, "CPU", AUTO) is PipelineType.LM_CB


def test_has_vlm_files(vlm_dir: Path, text_dir: Path, gguf_file: Path) -> None:
    assert has_vlm_files(vlm_dir)
    assert not has_vlm_files(text_dir)
    assert not has_vlm_files(gguf_file)


@pytest.mark.parametrize(
    ("model", "requested"),
    [
        ("text_dir", PipelineType.LM),
        ("text_dir", PipelineType.LM_CB),
        ("gguf_file", PipelineType.LM),
        ("gguf_file", PipelineType.LM_CB),
        ("vlm_dir", PipelineType.VLM),
        ("vlm_dir", PipelineType.VLM_CB),
    ],
)
@pytest.mark.parametrize("device", ["CPU", "NPU"])
def test_explicit_types_that_fit(
    request: pytest.FixtureRequest, model: str, requested: PipelineType, device: str
) -> None:
    path: Path = request.getfixturevalue(model)
    assert infer_pipeline_type(path, device, requested) is requested


@pytest.mark.parametrize("requested", [PipelineType.VLM, PipelineType.VLM_CB])
@pytest.mark.parametrize("model", ["text_dir", "gguf_file"])
def test_vision_type_for_text_model(
    request: pytest.FixtureRequest, model: str, requested: PipelineType
) -> None:
    path: Path = request.getfixturevalue(model)
    with pytest.raises(ServableLoadError) as info:
        infer_pipeline_type(path, "CPU", requested)
    assert info.value.message == (
        f"pipeline_type {requested.value} needs a vision-language model directory, but {path} "
        "lacks openvino_text_embeddings_model.xml and openvino_vision_embeddings_model.xml"
    )
    assert info.value.param == "pipeline_type"


@pytest.mark.parametrize("requested", [PipelineType.LM, PipelineType.LM_CB])
def test_text_type_for_vision_model(vlm_dir: Path, requested: PipelineType) -> None:
    with pytest.raises(ServableLoadError) as info:
        infer_pipeline_type(vlm_dir, "CPU", requested)
    assert info.value.message == (
        f"pipeline_type {requested.value} is for text-only models, but {vlm_dir} holds a "
        "vision-language model (it has vision and text embedding models); use VLM_CB or VLM"
    )
    assert info.value.param == "pipeline_type"


def test_omni_model_is_refused(vlm_dir: Path) -> None:
    (vlm_dir / OMNI_MARKER).write_text("<net/>", encoding="utf-8")
    with pytest.raises(ServableLoadError, match=r"^OMNI models are not supported by graphrt yet$"):
        infer_pipeline_type(vlm_dir, "CPU", AUTO)


@pytest.mark.parametrize("model", ["text_dir", "vlm_dir", "gguf_file"])
def test_omni_type_is_refused(request: pytest.FixtureRequest, model: str) -> None:
    path: Path = request.getfixturevalue(model)
    with pytest.raises(ServableLoadError) as info:
        infer_pipeline_type(path, "CPU", PipelineType.OMNI)
    assert info.value.message == "pipeline_type OMNI is not supported by graphrt yet"


def test_pipeline_type_properties() -> None:
    assert {t for t in PipelineType if t.continuous_batching} == {
        PipelineType.LM_CB,
        PipelineType.VLM_CB,
    }
    assert {t for t in PipelineType if t.vision} == {PipelineType.VLM, PipelineType.VLM_CB}


# ----------------------------------------------------------------------------- openable_gguf
# openvino-genai opens GGUF files read-write (gguflib), so one this process may not write is
# loaded from a copy in the cache. Root may write any file outside a read-only mount, so
# "not writable" is simulated through os.access here; the container test mounts one for real.


def read_only(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> None:
    real_access = os.access

    def access(path: Any, mode: int, **kwargs: Any) -> bool:
        if mode & os.W_OK and Path(path) in paths:
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)


def test_writable_gguf_and_directories_are_used_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path / "cache"))
    model = tiny_gguf(tmp_path / "m.gguf")
    assert openable_gguf(model) == model
    read_only(monkeypatch, tmp_path)
    assert openable_gguf(tmp_path) == tmp_path
    assert not (tmp_path / "cache").exists()


def test_read_only_gguf_is_copied_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "models").mkdir()
    model = tiny_gguf(tmp_path / "models" / "m.gguf")
    read_only(monkeypatch, model)
    copy = openable_gguf(model)
    assert copy != model
    assert copy.name == "m.gguf"
    assert copy.is_relative_to(tmp_path / "cache" / "gguf")
    assert copy.read_bytes() == model.read_bytes()
    assert [path.name for path in copy.parent.iterdir()] == ["m.gguf"]  # no partial file left
    mtime = copy.stat().st_mtime_ns
    assert openable_gguf(model) == copy
    assert copy.stat().st_mtime_ns == mtime  # reused, not copied again
    # A changed file (size or mtime) gets a new copy.
    tiny_gguf(model, context_length=4096)
    os.utime(model, ns=(1, 1))
    assert openable_gguf(model) != copy


def test_read_only_gguf_without_a_writable_cache_is_used_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory should be", encoding="utf-8")
    monkeypatch.setenv("GRAPHRT_CACHE", str(blocker))
    model = tiny_gguf(tmp_path / "m.gguf")
    read_only(monkeypatch, model)
    assert openable_gguf(model) == model
    assert "is read-only and could not be copied" in caplog.text
