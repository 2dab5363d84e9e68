"""Image generation, speech-to-text and text-to-speech graphs: what the writers produce parses,
validates with the real calculators and decodes to the options given (and loads as a servable
config); `--source_loras` is read with OVMS's syntax; a model directory's task is inferred in
OVMS's detector order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from calculators.image_gen.image_gen_calculator_pb2 import ImageGenCalculatorOptions, LoraLoadMode
from calculators.image_gen.resources import servable_config as image_gen_config
from calculators.speech_to_text.resources import servable_config as s2t_config
from calculators.speech_to_text.s2t_calculator_pb2 import S2tCalculatorOptions
from calculators.text_to_speech.resources import servable_config as t2s_config
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from graphrt.export.image_audio_graphs import (
    HEADER,
    CompositeLoraSetting,
    ImageGenerationSettings,
    LoraSetting,
    LoraSource,
    SpeechToTextSettings,
    TextToSpeechSettings,
    image_generation_graph,
    image_task,
    media_graph,
    media_task,
    parse_source_loras,
    speech2text_graph,
    text2speech_graph,
)
from graphrt.export.task_flags import TaskFlags
from graphrt.export.text_graphs import infer_task
from graphruntime import ValidatedGraph, parse_graph_config


def decode(text: str, message: type[Message]) -> Any:
    """The single node's options of a graph, after parsing and validating it."""
    graph = ValidatedGraph.from_config(parse_graph_config(text))
    (node,) = graph.nodes
    options = graph.node_options(node, message)
    assert isinstance(options, message)
    return options


# ------------------------------------------------------------------------------ image generation


def test_minimal_image_generation_graph_leaves_ovms_defaults() -> None:
    text = image_generation_graph(ImageGenerationSettings("./"))
    assert text.startswith(HEADER)
    options = decode(text, ImageGenCalculatorOptions)
    assert options.models_path == "./"
    for name in ("device", "plugin_config", "resolution", "max_resolution", "guidance_scale"):
        assert not options.HasField(name), name
    assert options.max_resolution == "4096x4096" and options.max_num_inference_steps == 100
    assert not options.lora_adapters


def test_image_generation_graph_round_trips_every_option(tmp_path: Path) -> None:
    settings = ImageGenerationSettings(
        models_path="./",
        target_device="GPU",
        num_streams=2,
        plugin_config={"CACHE_DIR": "/tmp/c"},
        resolution="512x512",
        num_images_per_prompt=2,
        guidance_scale=7.5,
        default_num_inference_steps=20,
        max_num_inference_steps=40,
        loras=[
            LoraSetting("ink", "loras/ink.safetensors", 0.5),
            LoraSetting("sketch", "s.safetensors"),
        ],
        composite_loras=[CompositeLoraSetting("mix", [("ink", 0.25), ("sketch", None)])],
    )
    options = decode(image_generation_graph(settings), ImageGenCalculatorOptions)
    assert options.device == "GPU"
    assert json.loads(options.plugin_config) == {"NUM_STREAMS": "2", "CACHE_DIR": "/tmp/c"}
    assert options.resolution == "512x512" and options.num_images_per_prompt == 2
    assert options.guidance_scale == 7.5
    assert options.default_num_inference_steps == 20 and options.max_num_inference_steps == 40
    ink, sketch = options.lora_adapters
    assert (ink.alias, ink.path, ink.alpha, ink.mode) == (
        "ink",
        "loras/ink.safetensors",
        0.5,
        LoraLoadMode.DYNAMIC,
    )
    assert (sketch.alias, sketch.HasField("alpha"), sketch.alpha) == ("sketch", False, 1.0)
    (mix,) = options.composite_lora_adapters
    assert mix.alias == "mix"
    assert [(c.adapter_alias, c.HasField("alpha")) for c in mix.components] == [
        ("ink", True),
        ("sketch", False),
    ]
    assert mix.components[0].alpha == 0.25

    # What the writer produced loads under OVMS's rules, the adapters found beside the graph.
    (tmp_path / "model_index.json").write_text("{}")
    (tmp_path / "loras").mkdir()
    (tmp_path / "loras" / "ink.safetensors").write_bytes(b"")
    (tmp_path / "s.safetensors").write_bytes(b"")
    config = image_gen_config(options, tmp_path, "sd")
    assert [(a.alias, a.path, a.alpha) for a in config.adapters] == [
        ("ink", (tmp_path / "loras" / "ink.safetensors").resolve(), 0.5),
        ("sketch", (tmp_path / "s.safetensors").resolve(), 1.0),
    ]
    assert config.composites[0].components == (("ink", 0.25), ("sketch", None))
    assert config.devices == ("GPU",) and config.static_images == 2


def test_npu_adapters_are_static() -> None:
    settings = ImageGenerationSettings("./", target_device="NPU", loras=[LoraSetting("a", "a.st")])
    (adapter,) = decode(image_generation_graph(settings), ImageGenCalculatorOptions).lora_adapters
    assert adapter.mode == LoraLoadMode.STATIC


def test_paths_are_escaped() -> None:
    path = 'C:\\models\\"sd" é'
    settings = ImageGenerationSettings(path, loras=[LoraSetting('al"ias', path)])
    options = decode(image_generation_graph(settings), ImageGenCalculatorOptions)
    assert options.models_path == path
    assert (options.lora_adapters[0].alias, options.lora_adapters[0].path) == ('al"ias', path)


def test_max_resolution_and_defaults_without_static_shapes() -> None:
    settings = ImageGenerationSettings(
        "./",
        max_resolution="1024x768",
        default_resolution="512x512",
        max_num_images_per_prompt=4,
    )
    options = decode(image_generation_graph(settings), ImageGenCalculatorOptions)
    assert (options.max_resolution, options.default_resolution) == ("1024x768", "512x512")
    assert options.max_num_images_per_prompt == 4 and not options.HasField("resolution")


# ---------------------------------------------------------------------------- speech to text


@pytest.mark.parametrize("words", [False, True])
def test_speech2text_graph(tmp_path: Path, words: bool) -> None:
    settings = SpeechToTextSettings("./whisper", target_device="CPU", enable_word_timestamps=words)
    text = speech2text_graph(settings)
    graph = ValidatedGraph.from_config(parse_graph_config(text))
    (node,) = graph.nodes
    assert node.back_edges  # the LOOPBACK edge a stream needs
    options = decode(text, S2tCalculatorOptions)
    assert options.models_path == "./whisper" and options.target_device == "CPU"
    assert options.HasField("enable_word_timestamps") == words
    assert options.enable_word_timestamps == words
    assert json.loads(options.plugin_config) == {"NUM_STREAMS": "1"}  # OVMS's default
    (tmp_path / "whisper").mkdir()
    (tmp_path / "whisper" / "openvino_encoder_model.xml").write_text("")
    config = s2t_config(options, tmp_path, "whisper")
    assert config.word_timestamps == words and config.properties == {"NUM_STREAMS": "1"}


def test_no_num_streams_and_no_plugin_config_write_none() -> None:
    options = decode(
        speech2text_graph(SpeechToTextSettings("./", num_streams=None)), S2tCalculatorOptions
    )
    assert not options.HasField("plugin_config") and not options.HasField("target_device")


# ---------------------------------------------------------------------------- text to speech


def test_text2speech_graph(tmp_path: Path) -> None:
    settings = TextToSpeechSettings(
        "./",
        num_streams=3,
        plugin_config={"PERFORMANCE_HINT": "LATENCY"},
        voices={"ana": "voices/ana.bin", "bo": "bo.bin"},
    )
    options = decode(text2speech_graph(settings), T2sCalculatorOptions)
    assert json.loads(options.plugin_config) == {"NUM_STREAMS": "3", "PERFORMANCE_HINT": "LATENCY"}
    assert [(v.name, v.path) for v in options.voices] == [
        ("ana", "voices/ana.bin"),
        ("bo", "bo.bin"),
    ]
    assert (options.speed_min, options.speed_max) == (0.25, 4.0)
    (tmp_path / "config.json").write_text("{}")
    config = t2s_config(options, tmp_path, "tts")
    assert config.voices == {
        "ana": (tmp_path / "voices" / "ana.bin").resolve(),
        "bo": (tmp_path / "bo.bin").resolve(),
    }


# ---------------------------------------------------------------------------------- media_graph


def test_media_graph_writes_the_tasks_graph_from_the_flags() -> None:
    flags = TaskFlags(resolution="512x512 768x768", max_num_inference_steps=30)
    loras = [LoraSetting("a", "a.safetensors", 0.8)]
    image = decode(
        media_graph("image_generation", "./", flags, {"CACHE_DIR": "/c"}, loras),
        ImageGenCalculatorOptions,
    )
    assert image.resolution == "512x512 768x768" and image.max_num_inference_steps == 30
    assert image.lora_adapters[0].alpha == pytest.approx(0.8)
    assert image.device == "CPU"  # --target_device's default
    assert json.loads(image.plugin_config) == {"NUM_STREAMS": "1", "CACHE_DIR": "/c"}
    s2t = decode(
        media_graph("speech2text", "./", TaskFlags(enable_word_timestamps=True, num_streams=2), {}),
        S2tCalculatorOptions,
    )
    assert s2t.enable_word_timestamps
    assert json.loads(s2t.plugin_config) == {"NUM_STREAMS": "2"}
    t2s = decode(
        media_graph("text2speech", "/m", TaskFlags(target_device="GPU"), {}), T2sCalculatorOptions
    )
    assert t2s.models_path == "/m" and t2s.target_device == "GPU"


# --------------------------------------------------------------------------------- source_loras


def test_source_loras_adapters_and_alphas() -> None:
    adapters, composites = parse_source_loras(
        "ink=org/ink-lora, local=/loras/x.safetensors:0.5,"
        "web=https://host:8080/path/w.safetensors,"
        "webalpha=https://host/w2.safetensors:1.25,"
        "pick=org/repo@file.safetensors:0.75"
    )
    assert adapters == [
        LoraSource("ink", "org/ink-lora", None),
        LoraSource("local", "/loras/x.safetensors", 0.5),
        LoraSource("web", "https://host:8080/path/w.safetensors", None),
        LoraSource("webalpha", "https://host/w2.safetensors", 1.25),
        LoraSource("pick", "org/repo@file.safetensors", 0.75),
    ]
    assert composites == []


def test_source_loras_composites_of_earlier_adapters() -> None:
    adapters, composites = parse_source_loras("a=x.safetensors,b=y.safetensors:2,mix=@a:0.3+@b")
    assert [a.alias for a in adapters] == ["a", "b"]
    assert composites == [CompositeLoraSetting("mix", [("a", 0.3), ("b", None)])]


def test_source_loras_skips_empty_entries() -> None:
    adapters, _ = parse_source_loras(",a=x.safetensors,,")
    assert [a.alias for a in adapters] == ["a"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "x.safetensors",
            "Missing alias in --source_loras entry: 'x.safetensors'. Expected format: alias=source",
        ),
        ("=x.safetensors", "Missing alias in --source_loras entry: '=x.safetensors'."),
        (
            "a=x.safetensors,mix=@a+@b",
            "Composite LoRA references unknown adapter 'b' in entry: 'mix=@a+@b'",
        ),
    ],
)
def test_source_loras_refusals(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_source_loras(text)
    assert str(caught.value).startswith(message)


# ---------------------------------------------------------------------------------- task detection


def model_dir(tmp_path: Path, **files: Any) -> Path:
    """A model directory holding the given JSON files (`model_index` → model_index.json)."""
    directory = tmp_path / "model"
    directory.mkdir()
    for name, data in files.items():
        (directory / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return directory


@pytest.mark.parametrize(
    ("files", "task"),
    [
        ({"config": {"architectures": ["WhisperForConditionalGeneration"]}}, "speech2text"),
        ({"config": {"architectures": ["SeamlessM4Tv2ForSpeechToText"]}}, "speech2text"),
        ({"config": {"architectures": ["SpeechT5ForTextToSpeech"]}}, "text2speech"),
        ({"config": {"architectures": ["VitsForTextToSpeech"]}}, "text2speech"),
        ({"config": {"architectures": ["ParlerTTSForConditionalGeneration"]}}, "text2speech"),
        ({"config": {"architectures": None, "n_mels": 80}}, "text2speech"),  # Kokoro
        ({"model_index": {"_class_name": "StableDiffusionPipeline"}}, "image_generation"),
        ({"model_index": {"_class_name": "StableDiffusionXLPipeline"}}, "image_generation"),
        ({"model_index": {"_class_name": "FluxPipeline"}}, "image_generation"),
        ({"model_index": {"_class_name": "WanPipeline"}}, "text_generation"),
        ({"config": {"architectures": ["UNet2DConditionModel"]}}, "image_generation"),
        ({"config": {"architectures": ["SD3Transformer2DModel"]}}, "image_generation"),
        ({"config": {"architectures": ["BertForSequenceClassification"]}}, "rerank"),
        ({"config": {"architectures": ["BertModel"]}}, "embeddings"),
        ({"config": {"architectures": ["LlamaForCausalLM"]}}, "text_generation"),
    ],
)
def test_infer_task(tmp_path: Path, files: dict[str, Any], task: str) -> None:
    assert infer_task(model_dir(tmp_path, **files)) == task


def test_detectors_run_in_ovms_order(tmp_path: Path) -> None:
    """speech2text, text2speech, rerank, image_generation, embeddings, text_generation."""
    reranker_with_an_index = model_dir(
        tmp_path,
        config={"architectures": ["BertForSequenceClassification"]},
        model_index={"_class_name": "StableDiffusionPipeline"},
    )
    assert infer_task(reranker_with_an_index) == "rerank"
    pooling_with_an_index = tmp_path / "b"
    pooling_with_an_index.mkdir()
    (pooling_with_an_index / "modules.json").write_text(
        json.dumps([{"type": "sentence_transformers.models.Pooling"}])
    )
    (pooling_with_an_index / "model_index.json").write_text('{"_class_name": "FluxPipeline"}')
    assert infer_task(pooling_with_an_index) == "image_generation"
    cross_encoder_whisper = tmp_path / "c"
    cross_encoder_whisper.mkdir()
    (cross_encoder_whisper / "config.json").write_text(
        '{"architectures": ["WhisperForConditionalGeneration"]}'
    )
    (cross_encoder_whisper / "modules.json").write_text('[{"type": "x.CrossEncoder"}]')
    assert infer_task(cross_encoder_whisper) == "speech2text"


def test_media_and_image_task_on_their_own(tmp_path: Path) -> None:
    whisper = model_dir(tmp_path, config={"architectures": ["WhisperForConditionalGeneration"]})
    assert media_task(whisper) == "speech2text" and image_task(whisper) is None
    file = tmp_path / "model.gguf"
    file.write_bytes(b"GGUF")
    assert media_task(file) is None and image_task(file) is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "model_index.json").write_text("[]")
    assert media_task(broken) is None and image_task(broken) is None
    assert infer_task(broken) == "text_generation"


def test_n_mels_alone_is_not_kokoro(tmp_path: Path) -> None:
    """OVMS's Text2SpeechDetector takes n_mels only with `"architectures": null` present; a
    config.json with no architectures key at all is no text-to-speech model to it."""
    assert media_task(model_dir(tmp_path, config={"n_mels": 80})) is None
