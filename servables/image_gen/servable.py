"""The image generation servable: text-to-image, image-to-image and inpainting on one model.

As in OVMS, the models of one diffusers directory are loaded and compiled once: the inpainting
pipeline is built from the directory and the image-to-image and text-to-image pipelines are
derived from it, sharing its compiled models (a model that has no inpainting form gets
image-to-image, then text-to-image, from the directory instead). Requests run one at a time on
the servable's thread (servables.runtime.thread_runner; the pipelines release the GIL), so the event
loop and an LLM beside them go on. The step callback of each generation does three things:
counts the step for /metrics, stops the generation within one denoising step once the request
is cancelled (its client went away), and, for a stream, decodes the latent into a preview at
the steps `partial_images` asks for. Images are encoded on the same thread, and copied out of
the pipeline's output buffer first: the next generation reuses that buffer.

LoRA adapters (safetensors) are compiled in: DYNAMIC ones are applied per request by the
request's `model` (an adapter's or a composite's alias; the graph's own name runs the base
model with every adapter at 0), STATIC and FUSE ones are always on. `lora_alphas` overrides
alphas, as in OVMS.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from servables.errors import InvalidRequest, ServableError, ServableLoadError, readable_message
from servables.hf_config import read_json
from servables.image_gen.config import ImageGenConfig, Resolution
from servables.image_gen.protocol import (
    ImageArray,
    ImageRequest,
    Usage,
    encode_image,
    preview_steps,
)
from servables.runtime.pipeline_servable import PipelineServable
from servables.runtime.thread_runner import Finished, Job

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartialImage:
    """A preview of image `index` (base64 in the request's format), sent while it denoises."""

    index: int
    b64: str


@dataclass(frozen=True)
class GeneratedImages:
    images: list[str]  # base64, in the request's output format
    usage: Usage


def _genai() -> Any:
    import openvino_genai

    return openvino_genai


def vae_scale_factor(models_path: Path) -> int:
    """What width and height must be multiples of: the VAE's downscaling (2 per block after
    the first), doubled for FLUX, which packs latents in 2x2 patches."""
    vae = read_json(models_path / "vae_decoder" / "config.json")
    blocks = vae.get("block_out_channels")
    factor = 2 ** (len(blocks) - 1) if isinstance(blocks, list) and blocks else 8
    kind = str(read_json(models_path / "model_index.json").get("_class_name", ""))
    return factor * 2 if "Flux" in kind else factor


class ImageGenServable(PipelineServable):
    """See the module docstring; `start()` loads and compiles (seconds), `stop()` releases."""

    kind = "image_generation"
    description = "image generation"
    config: ImageGenConfig

    def __init__(self, config: ImageGenConfig) -> None:
        super().__init__(config)
        self.scale = vae_scale_factor(config.models_path)
        self.text2image: Any = None
        self.image2image: Any = None
        self.inpainting: Any = None
        self.tokenizer: Any = None
        self._adapters: dict[str, Any] = {}  # alias -> openvino_genai.Adapter

    def aliases(self) -> list[str]:
        """LoRA adapters and their blends, each selected by a request's `model`."""
        return self.config.aliases()

    def _describe(self) -> str:
        pipelines = [
            name
            for name, pipe in (
                ("text-to-image", self.text2image),
                ("image-to-image", self.image2image),
                ("inpainting", self.inpainting),
            )
            if pipe is not None
        ]
        return f"{', '.join(pipelines)}; {' '.join(self.config.devices)}"

    def _unload(self) -> None:
        self.text2image = self.image2image = self.inpainting = None

    # ------------------------------------------------------------------------------ loading

    def _adapter_config(self) -> Any:
        """Every adapter, compiled in at its alpha: FUSE merged into the weights, STATIC fixed,
        DYNAMIC set per request (_request_adapters)."""
        genai = _genai()
        config = self.config
        if not config.adapters:
            return None
        modes = {adapter.mode for adapter in config.adapters}
        if len(modes) > 1:
            raise ServableLoadError(
                f"{self.name}: LoRA adapters of one graph must share one mode (got "
                f"{', '.join(sorted(modes))})",
                param="lora_adapters",
            )
        mode = {
            "DYNAMIC": genai.AdapterConfig.Mode.MODE_DYNAMIC,
            "STATIC": genai.AdapterConfig.Mode.MODE_STATIC,
            "FUSE": genai.AdapterConfig.Mode.MODE_FUSE,
        }[modes.pop()]
        adapter_config = genai.AdapterConfig(mode)
        for adapter in config.adapters:
            loaded = genai.Adapter(str(adapter.path))
            self._adapters[adapter.alias] = loaded
            adapter_config.add(loaded, adapter.alpha)
        return adapter_config

    def _build(self, kind: Callable[..., Any], source: Any) -> Any:
        try:
            return kind(source)
        except RuntimeError as error:
            logger.debug("%s: %s unavailable: %s", self.name, kind.__name__, error)
            return None

    def _load(self) -> None:
        genai = _genai()
        config = self.config
        path = str(config.models_path)
        try:
            first = self._build(genai.InpaintingPipeline, path)
            if first is None:
                first = self._build(genai.Image2ImagePipeline, path)
            if first is None:
                first = genai.Text2ImagePipeline(path)
            if len(config.static_resolutions) == 1:
                size = config.static_resolutions[0]
                guidance = config.static_guidance_scale
                if guidance is None:
                    guidance = first.get_generation_config().guidance_scale
                first.reshape(config.static_images or 1, size.height, size.width, guidance)
            properties = dict(config.properties)
            adapters = self._adapter_config()
            if adapters is not None:
                properties["adapters"] = adapters
            first.compile(*config.devices, **properties)
        except RuntimeError as error:
            raise ServableLoadError(
                f"{self.name}: cannot load the image generation model: "
                f"{readable_message(str(error))}"
            ) from error
        if isinstance(first, genai.InpaintingPipeline):
            self.inpainting = first
            self.image2image = self._build(genai.Image2ImagePipeline, first)
        elif isinstance(first, genai.Image2ImagePipeline):
            self.image2image = first
        self.text2image = (
            first
            if isinstance(first, genai.Text2ImagePipeline)
            else self._build(genai.Text2ImagePipeline, self.image2image or first)
        )
        tokenizer_dir = config.models_path / "tokenizer"
        if (tokenizer_dir / "openvino_tokenizer.xml").is_file():
            try:
                self.tokenizer = genai.Tokenizer(str(tokenizer_dir))
            except RuntimeError:
                logger.debug("%s: no tokenizer for usage counts", self.name, exc_info=True)

    # ------------------------------------------------------------------------------ requests

    def _request_adapters(self, request: ImageRequest) -> Any:
        """The adapters and alphas `request.model` selects (None: leave the compiled ones)."""
        config = self.config
        dynamic = {a.alias: a for a in config.dynamic_adapters}
        alphas = request.lora_alphas
        if not dynamic or config.static_adapters:
            if alphas:
                raise InvalidRequest(
                    "lora_alphas is not supported when no dynamic LoRA adapters are available. "
                    "Alpha values cannot be overridden for STATIC (NPU) or FUSE mode adapters.",
                    param="lora_alphas",
                )
            return None
        composites = {c.alias: c for c in config.composites}
        chosen: dict[str, float]
        if request.model in dynamic:
            chosen = {request.model: dynamic[request.model].alpha}
            allowed = set(chosen)
        elif request.model in composites:
            chosen = {
                alias: dynamic[alias].alpha if alpha is None else alpha
                for alias, alpha in composites[request.model].components
            }
            allowed = set(chosen)
        else:  # the base model: every adapter off unless lora_alphas turns it on
            chosen = dict.fromkeys(dynamic, 0.0)
            allowed = set(dynamic)
        for key, alpha in (alphas or {}).items():
            if key not in allowed:
                target = request.model if request.model != self.name else "the base model"
                raise InvalidRequest(
                    f"lora_alphas key '{key}' is not an adapter of {target}", param="lora_alphas"
                )
            chosen[key] = alpha
        genai = _genai()
        adapter_config = genai.AdapterConfig()
        for alias, alpha in chosen.items():
            adapter_config.add(self._adapters[alias], alpha)
        return adapter_config

    def _fit(self, request: ImageRequest) -> Resolution | None:
        """The size to generate: the request's, which must be a multiple of the VAE's scale;
        for an edit that names none, its image's size, scaled down to fit max_resolution and
        rounded down to that multiple (the image and mask are resized to match)."""
        size, scale = request.size, self.scale
        if size is None:
            if request.image is None:
                return None  # the model's own
            height, width = request.image.shape[:2]
            limit = self.config.max_resolution
            shrink = min(1.0, limit.width / width, limit.height / height)
            width, height = int(width * shrink), int(height * shrink)
            return Resolution(
                max(scale, width - width % scale), max(scale, height - height % scale)
            )
        if size.width % scale or size.height % scale:
            raise InvalidRequest(
                f"size {size}: width and height must be multiples of {scale} for this model",
                param="size",
            )
        return size

    def _inputs(self, request: ImageRequest, size: Resolution | None) -> list[Any]:
        """The edit's image (and mask) as the pipeline takes them: NHWC uint8 tensors."""
        import openvino

        arrays = [a for a in (request.image, request.mask) if a is not None]
        tensors = []
        for array in arrays:
            if size is not None and (array.shape[1], array.shape[0]) != (size.width, size.height):
                resized = Image.fromarray(array).resize(
                    (size.width, size.height), Image.Resampling.LANCZOS
                )
                array = np.asarray(resized, dtype=np.uint8)
            tensors.append(openvino.Tensor(np.ascontiguousarray(array[np.newaxis])))
        return tensors

    def _pipeline(self, request: ImageRequest) -> Any:
        if not request.edit:
            pipe, what = self.text2image, "Text-to-image"
        elif request.mask is None:
            pipe, what = self.image2image, "Image-to-image"
        else:
            pipe, what = self.inpainting, "Inpainting"
        if pipe is None:
            raise InvalidRequest(f"{what} pipeline is not available for this model")
        return pipe

    def _options(self, request: ImageRequest, size: Resolution | None) -> dict[str, Any]:
        options: dict[str, Any] = {
            "num_inference_steps": request.steps,
            "num_images_per_prompt": request.n,
            **request.texts,
        }
        if size is not None:
            options["width"], options["height"] = size.width, size.height
        for name in ("guidance_scale", "strength", "max_sequence_length"):
            value = getattr(request, name)
            if value is not None:
                options[name] = value
        # No seed: a new image each time, as OpenAI's API gives (the pipeline's own default
        # is the fixed seed 42).
        options["rng_seed"] = request.seed if request.seed is not None else secrets.randbits(31)
        adapters = self._request_adapters(request)
        if adapters is not None:
            options["adapters"] = adapters
        return options

    def _prompt_tokens(self, request: ImageRequest) -> int:
        if self.tokenizer is None:
            return 0
        encoded = self.tokenizer.encode(request.prompt)
        return int(encoded.attention_mask.data.sum())

    def generate(
        self, request: ImageRequest
    ) -> AsyncGenerator[PartialImage | Finished[GeneratedImages], None]:
        """Previews as they are decoded (a stream with partial_images), then the images."""
        pipe = self._pipeline(request)
        size = self._fit(request)
        options = self._options(request, size)
        self.runner.admit()  # a full queue refuses now, not after the request's turn
        logger.debug(
            "%s: %s, %d image(s), %d steps, size %s",
            self.name,
            "edit" if request.edit else "generation",
            request.n,
            request.steps,
            size or "default",
        )

        def work(job: Job[PartialImage]) -> GeneratedImages:
            previews: list[int] | None = None
            failure: list[BaseException] = []

            def callback(step: int, steps: int, latent: Any) -> bool:
                # An exception escaping this callback aborts the whole process (openvino-genai
                # 2026.4): whatever goes wrong here stops the generation instead.
                nonlocal previews
                try:
                    job.step()
                    if job.cancelled:
                        return True
                    if previews is None:
                        previews = preview_steps(
                            steps, request.partial_images if request.stream else 0
                        )
                    if step in previews:
                        pixels = np.array(pipe.decode(latent).data, copy=True)[0]
                        preview = encode_image(
                            pixels, request.output_format, request.output_compression
                        )
                        job.emit(PartialImage(previews.index(step), preview))
                except BaseException as error:
                    failure.append(error)
                    return True
                return False

            inputs = self._inputs(request, size)  # resizing takes a while: on this thread
            try:
                tensor = pipe.generate(request.prompt, *inputs, callback=callback, **options)
            except RuntimeError as error:
                raise InvalidRequest(
                    f"Error during images generation: {readable_message(str(error))}"
                ) from error
            if failure:
                raise ServableError("the image preview failed") from failure[0]
            job.check()  # a cancelled generation returns an empty tensor
            pixels: ImageArray = np.array(tensor.data, copy=True)  # the buffer is reused
            if pixels.ndim != 4 or pixels.shape[0] == 0:
                raise ServableError("the pipeline returned no image")
            images = [
                encode_image(image, request.output_format, request.output_compression)
                for image in pixels
            ]
            return GeneratedImages(images, Usage(self._prompt_tokens(request)))

        return self.runner.stream(work)
