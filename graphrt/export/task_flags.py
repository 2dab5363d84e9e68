"""OVMS's task flags (`--max_num_seqs`, `--pooling`, `--resolution`, ...), each declared once.

A task flag sets an option of the graph written for a model. Each one is a field of TaskFlags:
the field's name is the flag's name (and the name of the graph option it becomes), its type and
default are the flag's, and its metadata holds the help and how the command line parses it. From
that one line `graphrt serve` and `graphrt export` add the flag to their parsers and read it back
into a TaskFlags (graphrt/cli/options.py), ServerSettings keeps that object whole, and
`graph_options` fills a graph writer's settings from it (text_graphs.py, image_audio_graphs.py).
Before, a flag was restated in serve's and export's parsers, in ServerSettings, in the copy
from the one to the other, and in the copies into each writer's settings: adding one meant
editing five places.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["Flag", "TaskFlags", "graph_options", "parse_bool"]


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


_SIZE = re.compile(r"^\d+x\d+$")


def _size(flag: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if not _SIZE.match(text):
            raise argparse.ArgumentTypeError(
                f"Invalid {flag} format. Expected WxH, e.g., 1024x1024"
            )
        return text

    return parse


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


@dataclass(frozen=True)
class Flag:
    """How the command line takes a task flag (a TaskFlags field's metadata)."""

    help: str
    parse: Callable[[str], Any] | None = None  # argparse's `type`; None: the text as given
    choices: tuple[str, ...] | None = None
    optional_value: bool = False  # `--flag` alone means true (OVMS's boolean flags that allow it)
    export: bool = True  # `graphrt export` takes it too (else `serve` only)
    media: bool = False  # listed with the image generation and audio tasks' flags


_T = TypeVar("_T")


def _flag(default: _T, help: str, **how: Any) -> _T:
    return field(default=default, metadata={"flag": Flag(help, **how)})


@dataclass(frozen=True)
class TaskFlags:
    """The task flags of docs/parameters.md, OVMS's names and defaults, in `--help`'s order."""

    # every task
    target_device: str = _flag("CPU", "OpenVINO device")
    # text_generation
    cache_size: int = _flag(
        0,
        "KV cache in GB; 0 = grow on demand (the prefix cache then keeps little of earlier "
        "requests)",
        parse=int,
    )
    max_num_seqs: int = _flag(256, "sequences batched at once", parse=int)
    max_num_batched_tokens: int | None = _flag(
        None, "tokens per engine step (engine default 256)", parse=int
    )
    enable_prefix_caching: bool = _flag(
        True, "reuse KV cache of shared prompt prefixes", parse=parse_bool
    )
    # export spells it --disable_dynamic_split_fuse, as export_model.py does (cli/export.py)
    dynamic_split_fuse: bool = _flag(
        True, "split long prompts over steps", parse=parse_bool, export=False
    )
    pipeline_type: str | None = _flag(
        None,
        "AUTO infers it from the device and files",
        choices=("LM", "LM_CB", "VLM", "VLM_CB", "AUTO"),
    )
    kv_cache_precision: str | None = _flag(
        None,
        "KV cache element type (engine default u8)",
        choices=("u8", "u4", "f16", "bf16", "f32"),
    )
    plugin_config: str | None = _flag(None, "JSON object of OpenVINO properties")
    # graphrt's extension: LLMCalculatorOptions' gguf_weights, for a .gguf model
    gguf_weights: str = _flag(
        "genai",
        "a .gguf model's weights: the file's own (genai), or requantized once at load to "
        "OpenVINO's channel-wise int4 or int8, not exact (docs/performance.md)",
        choices=("genai", "int4_channelwise", "int8_channelwise"),
    )
    # the graph's draft_models_path
    draft_source_model: str | None = _flag(
        None, "draft model path for speculative decoding", export=False
    )
    max_tokens_limit: int | None = _flag(
        None, "upper limit for a request's max_tokens", parse=int, export=False
    )
    tool_parser: str | None = _flag(
        None,
        "tool-call parser (hermes3, llama3, mistral, phi4, qwen3coder, gptoss, ...); default: "
        "detected from the chat template; none: off",
        export=False,
    )
    reasoning_parser: str | None = _flag(
        None,
        "reasoning parser (qwen3, gptoss); default: detected from the chat template; none: off",
        export=False,
    )
    enable_tool_guided_generation: bool = _flag(
        False,
        "constrain tool calls to the tools' schemas with the parser's grammar",
        parse=parse_bool,
        optional_value=True,
        export=False,
    )
    # embeddings and rerank (the image and audio tasks take num_streams too)
    num_streams: int = _flag(1, "embeddings/rerank: parallel streams", parse=int)
    pooling: str | None = _flag(
        None,
        "embeddings: pooling (default: the model's 1_Pooling/config.json, else CLS)",
        choices=("CLS", "LAST", "MEAN"),
    )
    normalize: bool = _flag(
        True,
        "embeddings: L2-normalise (default true)",
        parse=parse_bool,
        optional_value=True,
    )
    truncate: bool = _flag(
        False,
        "embeddings: cut inputs longer than the context instead of refusing them",
        parse=parse_bool,
        optional_value=True,
    )
    max_allowed_chunks: int | None = _flag(
        None, "rerank: most (query, document chunk) pairs per request (default 10000)", parse=int
    )
    # image_generation, speech2text, text2speech
    resolution: str | None = _flag(
        None,
        "image_generation: static size(s) the models are compiled for, 'WxH [WxH ...]'",
        media=True,
    )
    max_resolution: str | None = _flag(
        None,
        "image_generation: largest WxH a request may ask for",
        parse=_size("max_resolution"),
        media=True,
    )
    default_resolution: str | None = _flag(
        None,
        "image_generation: WxH when a request gives none",
        parse=_size("default_resolution"),
        media=True,
    )
    num_images_per_prompt: int | None = _flag(
        None, "image_generation: static batch", parse=_positive, media=True
    )
    guidance_scale: float | None = _flag(
        None, "image_generation: static guidance scale", parse=float, media=True
    )
    max_num_images_per_prompt: int | None = _flag(
        None,
        "image_generation: most images a request may ask for",
        parse=_positive,
        media=True,
    )
    default_num_inference_steps: int | None = _flag(
        None,
        "image_generation: denoising steps when a request gives none",
        parse=_positive,
        media=True,
    )
    max_num_inference_steps: int | None = _flag(
        None,
        "image_generation: most denoising steps a request may ask for",
        parse=_positive,
        media=True,
    )
    # parsed into the graph's lora_adapters and composite_lora_adapters (parse_source_loras)
    source_loras: str | None = _flag(
        None,
        "image_generation: LoRA adapters, 'alias=file.safetensors[:alpha],...' and "
        "composites 'alias=@a1[:w]+@a2[:w]'",
        media=True,
    )
    enable_word_timestamps: bool = _flag(
        False,
        "speech2text: allow timestamp_granularities=word",
        parse=parse_bool,
        optional_value=True,
        media=True,
    )
    # no graph option: how `graphrt export text2speech` converts the model
    model_type: str | None = _flag(
        None,
        "text2speech: the model family (export: how it is converted)",
        choices=("speecht5", "kokoro"),
        media=True,
    )


_Options = TypeVar("_Options", bound="DataclassInstance")


def graph_options(
    flags: TaskFlags,
    options_type: type[_Options],
    models_path: str,
    plugin_config: dict[str, Any],
    **given: Any,
) -> _Options:
    """A graph writer's settings: each option named as a task flag takes that flag's value;
    `plugin_config` is --plugin_config parsed (the flag itself is JSON text), and `given` sets
    options the flags do not name, or overrides them."""
    given = {"models_path": models_path, "plugin_config": plugin_config, **given}
    wanted = {option.name for option in fields(options_type)} - given.keys()
    taken = {each.name: getattr(flags, each.name) for each in fields(flags) if each.name in wanted}
    return options_type(**taken, **given)
