"""servable_config of the image generation and text-to-speech nodes: OVMS's load-time rules on
the options, each refusal a ServableLoadError naming the option, and a valid config's settings.

Only options are mapped and checked (no pipeline is built), so a models directory holding the
marker file the loader looks for is model enough.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from calculators.image_gen.image_gen_calculator_pb2 import (
    ImageGenCalculatorOptions,
    LoraLoadMode,
)
from calculators.image_gen.resources import servable_config
from calculators.text_to_speech.resources import servable_config as speech_config
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from servables.errors import ServableLoadError
from servables.image_gen.config import CompositeAdapter, ImageGenConfig, Resolution


@pytest.fixture
def graph_dir(tmp_path: Path) -> Path:
    """A graph directory with the diffusers model in ./model and one LoRA file beside it."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model_index.json").write_text(
        '{"_class_name": "StableDiffusionPipeline"}'
    )
    (tmp_path / "ink.safetensors").write_bytes(b"")
    return tmp_path


def options(text: str = "") -> ImageGenCalculatorOptions:
    parsed = text_format.Parse(text, ImageGenCalculatorOptions())
    if not parsed.HasField("models_path"):
        parsed.models_path = "model"
    return parsed


def load(graph_dir: Path, text: str = "", name: str = "sd") -> ImageGenConfig:
    return servable_config(options(text), graph_dir, name)


def refused(graph_dir: Path, text: str, name: str = "sd") -> ServableLoadError:
    with pytest.raises(ServableLoadError) as caught:
        load(graph_dir, text, name)
    return caught.value


# ---------------------------------------------------------------------------------- valid ones


def test_defaults_are_ovms_defaults(graph_dir: Path) -> None:
    config = load(graph_dir)
    assert config.name == "sd" and config.models_path == (graph_dir / "model").resolve()
    assert config.devices == ("CPU",) and config.properties == {}
    assert config.max_resolution == Resolution(4096, 4096) and config.default_resolution is None
    assert (config.max_images, config.default_steps, config.max_steps) == (10, 50, 100)
    assert config.static_resolutions == () and config.static_images is None
    assert config.static_guidance_scale is None and config.adapters == ()


def test_dynamic_shapes(graph_dir: Path) -> None:
    config = load(
        graph_dir,
        'device: "CPU GPU.1 NPU" plugin_config: \'{"NUM_STREAMS": "2"}\' '
        'max_resolution: "1024x768" default_resolution: "512x512" '
        "max_num_images_per_prompt: 4 default_num_inference_steps: 20 max_num_inference_steps: 30",
    )
    assert config.devices == ("CPU", "GPU.1", "NPU")  # text encoders, denoiser, VAE
    assert config.properties == {"NUM_STREAMS": "2"}
    assert config.max_resolution == Resolution(1024, 768)
    assert config.default_resolution == Resolution(512, 512)
    assert (config.max_images, config.default_steps, config.max_steps) == (4, 20, 30)


def test_one_static_resolution_with_batch_and_guidance(graph_dir: Path) -> None:
    config = load(graph_dir, 'resolution: "512x768" num_images_per_prompt: 2 guidance_scale: 5')
    assert config.static_resolutions == (Resolution(512, 768),)
    assert config.static_images == 2 and config.max_images == 2  # the batch is the limit
    assert config.static_guidance_scale == 5.0
    assert config.max_resolution == Resolution(512, 768)  # from the static size


def test_several_static_resolutions(graph_dir: Path) -> None:
    config = load(
        graph_dir, 'resolution: "512x512 768x256  256x1024" default_resolution: "768x256"'
    )
    assert config.static_resolutions == (
        Resolution(512, 512),
        Resolution(768, 256),
        Resolution(256, 1024),
    )
    assert config.max_resolution == Resolution(768, 1024)  # the largest side of each
    assert config.default_resolution == Resolution(768, 256)
    assert config.static_images is None and config.max_images == 10


def test_lora_adapters_and_composites(graph_dir: Path) -> None:
    (graph_dir / "loras").mkdir()
    (graph_dir / "loras" / "sketch.safetensors").write_bytes(b"")
    config = load(
        graph_dir,
        'lora_adapters { alias: "ink" path: "ink.safetensors" alpha: 0.5 } '
        'lora_adapters { alias: "sketch" path: "loras/sketch.safetensors" mode: FUSE } '
        'lora_adapters { alias: "abs" path: "' + str(graph_dir / "ink.safetensors") + '" } '
        'composite_lora_adapters { alias: "mix" components { adapter_alias: "ink" alpha: 0.25 } '
        'components { adapter_alias: "abs" } }',
    )
    ink, sketch, absolute = config.adapters
    assert (ink.alias, ink.path, ink.alpha, ink.mode) == (
        "ink",
        (graph_dir / "ink.safetensors").resolve(),
        0.5,
        "DYNAMIC",
    )
    assert (sketch.path, sketch.alpha, sketch.mode) == (
        (graph_dir / "loras" / "sketch.safetensors").resolve(),
        1.0,
        "FUSE",
    )
    assert absolute.path == (graph_dir / "ink.safetensors").resolve()
    assert config.composites == (CompositeAdapter("mix", (("ink", 0.25), ("abs", None))),)
    assert config.aliases() == ["ink", "abs", "mix"]  # FUSE adapters are always on, unnamed
    assert not config.static_adapters


def test_static_adapters(graph_dir: Path) -> None:
    config = load(graph_dir, 'lora_adapters { alias: "ink" path: "ink.safetensors" mode: STATIC }')
    assert config.adapters[0].mode == LoraLoadMode.Name(LoraLoadMode.STATIC)
    assert config.static_adapters


# ------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("text", "param", "message"),
    [
        (
            'device: "CPU GPU"',
            "device",
            "device must name one device, or three (text encoders, denoiser, VAE); got 'CPU GPU'",
        ),
        ('device: "A B C D"', "device", "device must name one device, or three"),
        ('resolution: "512x512 768x768 512x512"', "resolution", "Duplicate resolutions found"),
        (
            'resolution: "512x512" max_resolution: "1024x1024"',
            "max_resolution",
            "max_resolution cannot be set with static resolutions",
        ),
        (
            "guidance_scale: 7",
            "guidance_scale",
            "guidance_scale is a static shape setting: it needs `resolution`",
        ),
        (
            "num_images_per_prompt: 2",
            "num_images_per_prompt",
            "num_images_per_prompt is a static shape setting: it needs `resolution`",
        ),
        (
            'resolution: "512x512 768x768" num_images_per_prompt: 2',
            "num_images_per_prompt",
            "num_images_per_prompt needs exactly one static resolution",
        ),
        (
            'resolution: "512x512 768x768" guidance_scale: 2',
            "guidance_scale",
            "guidance_scale needs exactly one static resolution",
        ),
        (
            'resolution: "512x512" max_num_images_per_prompt: 3',
            "max_num_images_per_prompt",
            "max_num_images_per_prompt cannot be set with one static resolution",
        ),
        (
            'default_resolution: "5000x512"',
            "default_resolution",
            "default_resolution 5000x512 exceeds max_resolution 4096x4096",
        ),
        (
            'max_resolution: "1024x1024" default_resolution: "1024x1025"',
            "default_resolution",
            "default_resolution 1024x1025 exceeds max_resolution 1024x1024",
        ),
        (
            'resolution: "512x512" default_resolution: "256x256"',
            "default_resolution",
            "default_resolution 256x256 is not one of the static resolutions",
        ),
        (
            "default_num_inference_steps: 101",
            "default_num_inference_steps",
            "default_num_inference_steps exceeds max_num_inference_steps",
        ),
        (
            "max_num_inference_steps: 0",
            "max_num_inference_steps",
            "max_num_inference_steps must be greater than 0",
        ),
        (
            "max_num_images_per_prompt: 0",
            "max_num_images_per_prompt",
            "max_num_images_per_prompt must be greater than 0",
        ),
        ("plugin_config: '[1]'", "plugin_config", "plugin_config must be a JSON object"),
    ],
)
def test_refusals(graph_dir: Path, text: str, param: str, message: str) -> None:
    error = refused(graph_dir, text)
    assert error.param == param
    assert error.message.startswith(message)


@pytest.mark.parametrize("size", ["512", "0x512", "512x-5", "axb"])
def test_malformed_sizes(graph_dir: Path, size: str) -> None:
    for option in ("resolution", "max_resolution", "default_resolution"):
        error = refused(graph_dir, f'{option}: "{size}"')
        assert error.message == f"{option} must be WxH with positive integers, got {size!r}"


def test_a_missing_lora_file(graph_dir: Path) -> None:
    error = refused(graph_dir, 'lora_adapters { alias: "x" path: "loras/missing.safetensors" }')
    assert error.param == "lora_adapters"
    missing = (graph_dir / "loras" / "missing.safetensors").resolve()
    assert error.message == f"LoRA adapter 'x': {missing} does not exist"


def test_a_composite_naming_an_unknown_adapter(graph_dir: Path) -> None:
    error = refused(
        graph_dir,
        'lora_adapters { alias: "ink" path: "ink.safetensors" } '
        'composite_lora_adapters { alias: "mix" components { adapter_alias: "ink" } '
        'components { adapter_alias: "nope" } }',
    )
    assert error.param == "composite_lora_adapters"
    assert error.message == "composite LoRA adapter 'mix' names the unknown adapter 'nope'"


def test_an_empty_composite(graph_dir: Path) -> None:
    error = refused(graph_dir, 'composite_lora_adapters { alias: "mix" }')
    assert error.message == "composite LoRA adapter 'mix' has no components"


@pytest.mark.parametrize(
    ("text", "duplicates"),
    [
        ('lora_adapters { alias: "sd" path: "ink.safetensors" }', "sd"),
        (
            'lora_adapters { alias: "a" path: "ink.safetensors" } '
            'lora_adapters { alias: "a" path: "ink.safetensors" }',
            "a",
        ),
        (
            'lora_adapters { alias: "a" path: "ink.safetensors" } '
            'composite_lora_adapters { alias: "a" components { adapter_alias: "a" } }',
            "a",
        ),
        (
            'lora_adapters { alias: "a" path: "ink.safetensors" } '
            'composite_lora_adapters { alias: "sd" components { adapter_alias: "a" } }',
            "sd",
        ),
    ],
)
def test_aliases_are_unique_and_not_the_graphs_name(
    graph_dir: Path, text: str, duplicates: str
) -> None:
    """A request selects an adapter by its alias as `model`: one equal to the graph's name, or
    to another alias, would be ambiguous."""
    error = refused(graph_dir, text)
    assert error.param == "lora_adapters"
    assert error.message == (
        "LoRA aliases must be unique and differ from the graph's name: " + duplicates
    )


def test_the_models_directory_must_hold_model_index(graph_dir: Path) -> None:
    error = refused(graph_dir, 'models_path: "."')
    assert error.param == "models_path" and "has no model_index.json" in error.message
    error = refused(graph_dir, 'models_path: "nowhere"')
    assert error.param == "models_path" and "is not a directory" in error.message


# ------------------------------------------------------------------------------ text to speech


@pytest.fixture
def speech_dir(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


def test_speech_speed_range_is_checked_at_load(speech_dir: Path) -> None:
    inverted = T2sCalculatorOptions(models_path="./", speed_min=2, speed_max=1)
    with pytest.raises(ServableLoadError) as caught:
        speech_config(inverted, speech_dir, "tts")
    assert caught.value.message == (
        "Invalid T2sCalculatorOptions: speed_min (2) must be <= speed_max (1)"
    )
    assert caught.value.param == "speed_min"
    for low, high in ((float("nan"), 1.0), (0.0, 1.0), (-1.0, 1.0)):
        with pytest.raises(ServableLoadError, match="Invalid T2sCalculatorOptions"):
            speech_config(
                T2sCalculatorOptions(models_path="./", speed_min=low, speed_max=high),
                speech_dir,
                "tts",
            )


def test_speech_config(speech_dir: Path) -> None:
    options = T2sCalculatorOptions(models_path="./", target_device="GPU", speed_min=1, speed_max=1)
    options.voices.add(name="ana", path="voices/ana.bin")
    config = speech_config(options, speech_dir, "tts")
    assert config.speed_range == (1.0, 1.0) and config.device == "GPU"
    assert config.voices == {"ana": (speech_dir / "voices" / "ana.bin").resolve()}
    default = speech_config(T2sCalculatorOptions(models_path="./"), speech_dir, "tts")
    assert default.speed_range == (0.25, 4.0) and default.device == "CPU"
