"""Command-line flags more than one `graphrt` subcommand takes, and what they set up.

The encoder flags (`graphrt serve` and `graphrt export`), the user-code flags (`serve`,
`graph validate`, `graph profile`) and the true/false flag type are shared by several
subcommands, so they live here rather than in any one subcommand's module.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from graphrt.export.image_audio_graphs import MediaFlags
from graphrt.server import StartupError

__all__ = [
    "POOLING_CHOICES",
    "add_encoder_arguments",
    "add_media_arguments",
    "add_subgraph_path_argument",
    "add_user_code_arguments",
    "load_user_code",
    "media_flags",
    "parse_bool",
]


def add_user_code_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python_path",
        action="append",
        default=[],
        metavar="DIR",
        help="directory to import user calculators from (repeatable)",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="module to import at startup, e.g. one that registers calculators (repeatable)",
    )


def add_subgraph_path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--subgraph_path",
        action="append",
        default=[],
        metavar="DIR",
        help="directory of subgraph .pbtxt files (with `type:`), searched after the graph's own "
        "directory (repeatable)",
    )


def load_user_code(paths: Sequence[str], modules: Sequence[str]) -> None:
    """Make the user's calculators importable, and registered, before any graph loads."""
    for path in reversed(paths):
        sys.path.insert(0, str(Path(path).resolve()))
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:  # whatever the user's module raised while loading
            raise StartupError(f"--import {module}: {type(error).__name__}: {error}") from error


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


POOLING_CHOICES = ["CLS", "LAST", "MEAN"]


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """OVMS's embeddings and rerank task flags (docs/parameters.md)."""
    parser.add_argument(
        "--num_streams", type=int, default=1, help="embeddings/rerank: parallel streams"
    )
    parser.add_argument(
        "--pooling",
        choices=POOLING_CHOICES,
        help="embeddings: pooling (default: the model's 1_Pooling/config.json, else CLS)",
    )
    parser.add_argument(
        "--normalize",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="embeddings: L2-normalise (default true)",
    )
    parser.add_argument(
        "--truncate",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="embeddings: cut inputs longer than the context instead of refusing them",
    )
    parser.add_argument(
        "--max_allowed_chunks",
        type=int,
        help="rerank: most (query, document chunk) pairs per request (default 10000)",
    )


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


def add_media_arguments(parser: argparse.ArgumentParser) -> None:
    """OVMS's image_generation, speech2text and text2speech task flags (docs/parameters.md)."""
    group = parser.add_argument_group("image generation and audio tasks")
    group.add_argument(
        "--resolution",
        help="image_generation: static size(s) the models are compiled for, 'WxH [WxH ...]'",
    )
    group.add_argument(
        "--max_resolution",
        type=_size("max_resolution"),
        help="image_generation: largest WxH a request may ask for",
    )
    group.add_argument(
        "--default_resolution",
        type=_size("default_resolution"),
        help="image_generation: WxH when a request gives none",
    )
    group.add_argument(
        "--num_images_per_prompt", type=_positive, help="image_generation: static batch"
    )
    group.add_argument(
        "--guidance_scale", type=float, help="image_generation: static guidance scale"
    )
    group.add_argument(
        "--max_num_images_per_prompt",
        type=_positive,
        help="image_generation: most images a request may ask for",
    )
    group.add_argument(
        "--default_num_inference_steps",
        type=_positive,
        help="image_generation: denoising steps when a request gives none",
    )
    group.add_argument(
        "--max_num_inference_steps",
        type=_positive,
        help="image_generation: most denoising steps a request may ask for",
    )
    group.add_argument(
        "--source_loras",
        help="image_generation: LoRA adapters, 'alias=file.safetensors[:alpha],...' and "
        "composites 'alias=@a1[:w]+@a2[:w]'",
    )
    group.add_argument(
        "--enable_word_timestamps",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="speech2text: allow timestamp_granularities=word",
    )
    group.add_argument(
        "--model_type",
        choices=["speecht5", "kokoro"],
        help="text2speech: the model family (export: how it is converted)",
    )


def media_flags(args: argparse.Namespace) -> MediaFlags:
    return MediaFlags(
        resolution=args.resolution,
        num_images_per_prompt=args.num_images_per_prompt,
        guidance_scale=args.guidance_scale,
        max_resolution=args.max_resolution,
        default_resolution=args.default_resolution,
        max_num_images_per_prompt=args.max_num_images_per_prompt,
        default_num_inference_steps=args.default_num_inference_steps,
        max_num_inference_steps=args.max_num_inference_steps,
        source_loras=args.source_loras,
        enable_word_timestamps=args.enable_word_timestamps,
        model_type=args.model_type,
    )


def add_gguf_weights_argument(parser: argparse.ArgumentParser) -> None:
    """--gguf_weights (graphrt's extension), for serve and export: LLMCalculatorOptions'
    gguf_weights in the graph written for a .gguf model."""
    parser.add_argument(
        "--gguf_weights",
        choices=["genai", "int4_channelwise", "int8_channelwise"],
        default="genai",
        help="a .gguf model's weights: the file's own (genai), or requantized once at load "
        "to OpenVINO's channel-wise int4 or int8, not exact (docs/performance.md)",
    )
