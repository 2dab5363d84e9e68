"""The graph.pbtxt files OVMS writes for image generation, speech-to-text and text-to-speech.

Used in memory by `graphrt serve --model_path DIR --task ...` (or with the task inferred) and on
disk by `graphrt export image_generation|speech2text|text2speech`. Each graph is what OVMS's
`--task` graph export writes, option for option and in its order: only the options given are
written, so OVMS's defaults apply to the rest; the speech-to-text graph has the LOOPBACK edge
that streaming needs. `media_task` recognises a model directory as OVMS's task detection does.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrt.export.graph_text import architectures, quote, read_json
from graphrt.export.task_flags import TaskFlags, graph_options

MEDIA_TASKS = ("image_generation", "speech2text", "text2speech")
HEADER = "# OVMS_GRAPH_QUEUE_MAX_SIZE: AUTO\n"


def _plugin_config(plugin_config: dict[str, Any], num_streams: int | None) -> str | None:
    """The plugin_config JSON: NUM_STREAMS first when given, as OVMS's CLI writes it."""
    config = dict(plugin_config)
    if num_streams is not None:
        config = {"NUM_STREAMS": str(num_streams), **config}
    return json.dumps(config) if config else None


@dataclass
class LoraSetting:
    alias: str
    path: str  # relative to the graph's directory
    alpha: float | None = None


@dataclass
class CompositeLoraSetting:
    alias: str
    components: list[tuple[str, float | None]]


@dataclass
class ImageGenerationSettings:
    """The options of OVMS's image_generation graph; None: not written (OVMS's default). Like
    the audio graphs' settings, filled from the task flags of the same names
    (task_flags.graph_options)."""

    models_path: str
    target_device: str | None = None
    num_streams: int | None = None
    plugin_config: dict[str, Any] = field(default_factory=dict)
    resolution: str | None = None
    num_images_per_prompt: int | None = None
    guidance_scale: float | None = None
    max_resolution: str | None = None
    default_resolution: str | None = None
    max_num_images_per_prompt: int | None = None
    default_num_inference_steps: int | None = None
    max_num_inference_steps: int | None = None
    loras: list[LoraSetting] = field(default_factory=list)
    composite_loras: list[CompositeLoraSetting] = field(default_factory=list)


@dataclass
class SpeechToTextSettings:
    models_path: str
    target_device: str | None = None
    num_streams: int | None = 1
    plugin_config: dict[str, Any] = field(default_factory=dict)
    enable_word_timestamps: bool = False


@dataclass
class TextToSpeechSettings:
    models_path: str
    target_device: str | None = None
    num_streams: int | None = 1
    plugin_config: dict[str, Any] = field(default_factory=dict)
    voices: dict[str, str] = field(default_factory=dict)  # name -> speaker embedding file


def _first_lines(
    settings: ImageGenerationSettings | SpeechToTextSettings | TextToSpeechSettings,
    device_field: str,
) -> list[str]:
    """The options every media graph starts with (the device's field name is the task's)."""
    lines = [f"models_path: {quote(settings.models_path)}"]
    if settings.target_device:
        lines.append(f"{device_field}: {quote(settings.target_device)}")
    plugin_config = _plugin_config(settings.plugin_config, settings.num_streams)
    if plugin_config:
        lines.append(f"plugin_config: {quote(plugin_config)}")
    return lines


def _options(lines: list[str], indent: str) -> str:
    return "\n".join(f"{indent}{line}" for line in lines)


def image_generation_graph(settings: ImageGenerationSettings) -> str:
    lines = _first_lines(settings, "device")
    for name in (
        "resolution",
        "num_images_per_prompt",
        "guidance_scale",
        "max_resolution",
        "default_resolution",
        "max_num_images_per_prompt",
        "default_num_inference_steps",
        "max_num_inference_steps",
    ):
        value = getattr(settings, name)
        if value is not None:
            lines.append(f"{name}: {quote(value) if isinstance(value, str) else value}")
    for lora in settings.loras:
        alpha = f" alpha: {lora.alpha}" if lora.alpha is not None else ""
        mode = "STATIC" if "NPU" in (settings.target_device or "") else "DYNAMIC"
        lines.append(
            f"lora_adapters {{ alias: {quote(lora.alias)} path: {quote(lora.path)}{alpha} "
            f"mode: {mode} }}"
        )
    for composite in settings.composite_loras:
        parts = " ".join(
            f"components {{ adapter_alias: {quote(alias)}"
            + (f" alpha: {alpha}" if alpha is not None else "")
            + " }"
            for alias, alpha in composite.components
        )
        lines.append(f"composite_lora_adapters {{ alias: {quote(composite.alias)} {parts} }}")
    return f"""{HEADER}
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"

node: {{
  name: "ImageGenExecutor"
  calculator: "ImageGenCalculator"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "IMAGE_GEN_NODE_RESOURCES:pipes"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  node_options: {{
      [type.googleapis.com / mediapipe.ImageGenCalculatorOptions]: {{
{_options(lines, "          ")}
      }}
  }}
}}
"""


def speech2text_graph(settings: SpeechToTextSettings) -> str:
    lines = _first_lines(settings, "target_device")
    if settings.enable_word_timestamps:
        lines.append("enable_word_timestamps: true")
    return f"""{HEADER}
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node {{
    name: "S2tExecutor"
    calculator: "S2tCalculator"
    input_side_packet: "STT_NODE_RESOURCES:s2t_servable"
    input_stream: "LOOPBACK:loopback"
    input_stream: "HTTP_REQUEST_PAYLOAD:input"
    output_stream: "LOOPBACK:loopback"
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"
    input_stream_info: {{
        tag_index: 'LOOPBACK:0',
        back_edge: true
    }}
    node_options: {{
        [type.googleapis.com / mediapipe.S2tCalculatorOptions]: {{
{_options(lines, "            ")}
        }}
    }}
    input_stream_handler {{
        input_stream_handler: "SyncSetInputStreamHandler",
        options {{
            [mediapipe.SyncSetInputStreamHandlerOptions.ext] {{
                sync_set {{
                    tag_index: "LOOPBACK:0"
                }}
            }}
        }}
    }}
}}
"""


def text2speech_graph(settings: TextToSpeechSettings) -> str:
    lines = _first_lines(settings, "target_device")
    for name, path in settings.voices.items():
        lines.append(f"voices {{ name: {quote(name)} path: {quote(path)} }}")
    return f"""{HEADER}
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node {{
    name: "T2sExecutor"
    calculator: "T2sCalculator"
    input_side_packet: "TTS_NODE_RESOURCES:t2s_servable"
    input_stream: "HTTP_REQUEST_PAYLOAD:input"
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"
    node_options: {{
        [type.googleapis.com / mediapipe.T2sCalculatorOptions]: {{
{_options(lines, "            ")}
        }}
    }}
}}
"""


SPEECH_TO_TEXT = ("WhisperForConditionalGeneration", "Qwen3ASRForConditionalGeneration")
TEXT_TO_SPEECH = ("ParlerTTSForConditionalGeneration", "SpeechT5ForTextToSpeech")
IMAGE_ARCHITECTURES = ("CLIPTextModel", "UNet2DConditionModel", "AutoencoderKL")


def media_task(path: Path) -> str | None:
    """speech2text, text2speech or image_generation for a model directory, else None; OVMS's
    detectors in OVMS's order (rerank goes between text2speech and image_generation: the
    caller checks it first only where that order matters, as infer_task does)."""
    if not path.is_dir():
        return None
    names, config = architectures(path)
    if any(a in SPEECH_TO_TEXT or a.startswith("SeamlessM4T") for a in names):
        return "speech2text"
    if any(a in TEXT_TO_SPEECH or a.endswith("ForTextToSpeech") for a in names):
        return "text2speech"
    if "architectures" in config and config["architectures"] is None and "n_mels" in config:
        return "text2speech"  # Kokoro's config.json
    return None


def image_task(path: Path) -> str | None:
    """image_generation for a diffusers directory (model_index.json) or one of its parts."""
    if not path.is_dir():
        return None
    names, _ = architectures(path)
    if any(a in IMAGE_ARCHITECTURES or a.endswith("Transformer2DModel") for a in names):
        return "image_generation"
    index = read_json(path / "model_index.json")
    kind = index.get("_class_name") if isinstance(index, dict) else None
    if isinstance(kind, str) and ("StableDiffusion" in kind or "Flux" in kind):
        return "image_generation"
    return None


@dataclass(frozen=True)
class LoraSource:
    alias: str
    source: str  # a .safetensors file, a URL or a Hugging Face repository[@file]
    alpha: float | None


def _split_alpha(text: str, entry: str) -> tuple[str, float | None]:
    """`name[:alpha]`; a path's own colons (a URL, a drive letter) stay in the name."""
    head, colon, tail = text.rpartition(":")
    if not colon or "/" in tail or "\\" in tail or not head:
        return text, None
    try:
        return head, float(tail)
    except ValueError:
        raise ValueError(f"Invalid alpha value '{tail}' in entry: '{entry}'") from None


_ALIAS = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse_source_loras(text: str) -> tuple[list[LoraSource], list[CompositeLoraSetting]]:
    """`--source_loras`: comma-separated `alias=source[:alpha]` adapters and
    `alias=@a1[:w]+@a2[:w]` composites of adapters named anywhere in the list (OVMS's syntax
    and checks)."""
    adapters: list[LoraSource] = []
    composites: list[tuple[str, str, str]] = []  # alias, components text, the entry
    for entry in filter(None, (part.strip() for part in text.split(","))):
        alias, equals, value = entry.partition("=")
        if not equals or not alias:
            raise ValueError(
                f"Missing alias in --source_loras entry: '{entry}'. Expected format: alias=source"
            )
        if not value:
            raise ValueError(f"Alias and source must not be empty in entry: '{entry}'")
        if not _ALIAS.match(alias):
            raise ValueError(
                f"Invalid alias '{alias}' in --source_loras: use letters, digits, '_', '.', '-'"
            )
        if value.startswith("@"):
            composites.append((alias, value, entry))
        else:
            source, alpha = _split_alpha(value, entry)
            adapters.append(LoraSource(alias, source, alpha))
    known = {adapter.alias for adapter in adapters}
    blends = []
    for alias, value, entry in composites:
        components = []
        for part in value.split("+"):
            name, alpha = _split_alpha(part.strip().lstrip("@"), entry)
            if name not in known:
                raise ValueError(
                    f"Composite LoRA references unknown adapter '{name}' in entry: '{entry}'"
                )
            components.append((name, alpha))
        blends.append(CompositeLoraSetting(alias, components))
    return adapters, blends


def media_graph(
    task: str,
    models_path: str,
    flags: TaskFlags,
    plugin_config: dict[str, Any],
    loras: list[LoraSetting] | None = None,
    composites: list[CompositeLoraSetting] | None = None,
) -> str:
    """The graph of a media task for a model directory, from the task flags (and the LoRA
    adapters, already placed where the graph finds them)."""
    if task == "image_generation":
        return image_generation_graph(
            graph_options(
                flags,
                ImageGenerationSettings,
                models_path,
                plugin_config,
                loras=loras or [],
                composite_loras=composites or [],
            )
        )
    if task == "speech2text":
        return speech2text_graph(
            graph_options(flags, SpeechToTextSettings, models_path, plugin_config)
        )
    return text2speech_graph(graph_options(flags, TextToSpeechSettings, models_path, plugin_config))
