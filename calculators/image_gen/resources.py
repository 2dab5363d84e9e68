"""Build the image generation servable behind IMAGE_GEN_NODE_RESOURCES from the node's options.

The only place that knows both OVMS's ImageGenCalculatorOptions and the servable's settings.
OVMS's load-time rules are applied here, with its reasons: one or three devices; static
`resolution` sizes without duplicates, and with them neither an explicit `max_resolution` nor
(with several sizes) a static batch or guidance scale; `num_images_per_prompt` and
`guidance_scale` only with static sizes; `default_resolution` within `max_resolution` (and
among the static sizes); LoRA adapter files present, aliases unique, composites naming known
adapters.
"""

from __future__ import annotations

from pathlib import Path

from calculators.image_gen.image_gen_calculator_pb2 import (
    CompositeLoraAdapterEntry,
    ImageGenCalculatorOptions,
    LoraAdapterEntry,
    LoraLoadMode,
)
from calculators.model_paths import graph_relative, resolve_model_dir
from calculators.node_resources import node_options
from calculators.plugin_config import parse_plugin_config
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.errors import ServableLoadError
from servables.image_gen.config import (
    AdapterMode,
    CompositeAdapter,
    ImageGenConfig,
    LoraAdapter,
    Resolution,
)
from servables.image_gen.servable import ImageGenServable


def _devices(text: str) -> tuple[str, ...]:
    devices = tuple(text.split()) or ("CPU",)
    if len(devices) not in (1, 3):
        raise ServableLoadError(
            f"device must name one device, or three (text encoders, denoiser, VAE); got {text!r}",
            param="device",
        )
    return devices


def _static_sizes(options: ImageGenCalculatorOptions) -> tuple[Resolution, ...]:
    if not options.HasField("resolution"):
        for name in ("num_images_per_prompt", "guidance_scale"):
            if options.HasField(name):
                raise ServableLoadError(
                    f"{name} is a static shape setting: it needs `resolution`", param=name
                )
        return ()
    sizes = tuple(Resolution.parse(text, "resolution") for text in options.resolution.split())
    if not sizes:
        raise ServableLoadError("resolution names no size", param="resolution")
    if len(set(sizes)) != len(sizes):
        raise ServableLoadError("Duplicate resolutions found", param="resolution")
    if options.HasField("max_resolution"):
        raise ServableLoadError(
            "max_resolution cannot be set with static resolutions", param="max_resolution"
        )
    if len(sizes) > 1:
        for name in ("num_images_per_prompt", "guidance_scale"):
            if options.HasField(name):
                raise ServableLoadError(f"{name} needs exactly one static resolution", param=name)
    elif options.HasField("max_num_images_per_prompt"):
        raise ServableLoadError(
            "max_num_images_per_prompt cannot be set with one static resolution (the batch is "
            "num_images_per_prompt)",
            param="max_num_images_per_prompt",
        )
    return sizes


def _adapter(entry: LoraAdapterEntry, graph_dir: Path) -> LoraAdapter:
    path = graph_relative(entry.path, graph_dir)
    if not path.is_file():
        raise ServableLoadError(
            f"LoRA adapter {entry.alias!r}: {path} does not exist", param="lora_adapters"
        )
    mode: AdapterMode = LoraLoadMode.Name(entry.mode)  # type: ignore[assignment]
    return LoraAdapter(entry.alias, path, entry.alpha, mode)


def _composite(entry: CompositeLoraAdapterEntry, known: set[str]) -> CompositeAdapter:
    components = []
    for component in entry.components:
        if component.adapter_alias not in known:
            raise ServableLoadError(
                f"composite LoRA adapter {entry.alias!r} names the unknown adapter "
                f"{component.adapter_alias!r}",
                param="composite_lora_adapters",
            )
        alpha = component.alpha if component.HasField("alpha") else None
        components.append((component.adapter_alias, alpha))
    if not components:
        raise ServableLoadError(
            f"composite LoRA adapter {entry.alias!r} has no components",
            param="composite_lora_adapters",
        )
    return CompositeAdapter(entry.alias, tuple(components))


def servable_config(
    options: ImageGenCalculatorOptions, graph_dir: Path, name: str
) -> ImageGenConfig:
    """ImageGenCalculatorOptions → ImageGenConfig, with OVMS's rules (module docstring)."""
    models_path = resolve_model_dir(
        options.models_path, graph_dir, "Image generation", ("model_index.json",)
    )
    static = _static_sizes(options)
    max_resolution = Resolution.parse(options.max_resolution, "max_resolution")
    default = (
        Resolution.parse(options.default_resolution, "default_resolution")
        if options.HasField("default_resolution")
        else None
    )
    if default is not None and not default.fits(max_resolution):
        raise ServableLoadError(
            f"default_resolution {default} exceeds max_resolution {max_resolution}",
            param="default_resolution",
        )
    if default is not None and static and default not in static:
        raise ServableLoadError(
            f"default_resolution {default} is not one of the static resolutions",
            param="default_resolution",
        )
    for field in (
        "max_num_images_per_prompt",
        "default_num_inference_steps",
        "max_num_inference_steps",
    ):
        if getattr(options, field) < 1:
            raise ServableLoadError(f"{field} must be greater than 0", param=field)
    if options.default_num_inference_steps > options.max_num_inference_steps:
        raise ServableLoadError(
            "default_num_inference_steps exceeds max_num_inference_steps",
            param="default_num_inference_steps",
        )
    adapters = tuple(_adapter(entry, graph_dir) for entry in options.lora_adapters)
    aliases = [adapter.alias for adapter in adapters]
    composites = tuple(_composite(entry, set(aliases)) for entry in options.composite_lora_adapters)
    aliases += [composite.alias for composite in composites]
    duplicates = sorted(
        {alias for alias in aliases if aliases.count(alias) > 1} | ({name} & set(aliases))
    )
    if duplicates:
        raise ServableLoadError(
            "LoRA aliases must be unique and differ from the graph's name: "
            + ", ".join(duplicates),
            param="lora_adapters",
        )
    static_images = (
        options.num_images_per_prompt if options.HasField("num_images_per_prompt") else None
    )
    return ImageGenConfig(
        name=name,
        models_path=models_path,
        devices=_devices(options.device),
        properties=parse_plugin_config(options.plugin_config),
        max_resolution=(
            Resolution(max(r.width for r in static), max(r.height for r in static))
            if static
            else max_resolution
        ),
        default_resolution=default,
        max_images=static_images or options.max_num_images_per_prompt,
        default_steps=options.default_num_inference_steps,
        max_steps=options.max_num_inference_steps,
        static_resolutions=static,
        static_images=static_images,
        static_guidance_scale=options.guidance_scale
        if options.HasField("guidance_scale")
        else None,
        adapters=adapters,
        composites=composites,
    )


def build_image_gen_servable(graph: ValidatedGraph, node: NodeSpec, owner: str) -> ImageGenServable:
    options = node_options(graph, node, ImageGenCalculatorOptions)
    return ImageGenServable(servable_config(options, Path(graph.directory), owner))
