"""OpenAI's image API on an image generation servable: requests checked, responses written.

`POST /images/generations` takes JSON, `POST /images/edits` a multipart form with `image` and an
optional `mask`; both read the same fields (servables.io.request_fields), with OVMS's extensions
(`num_inference_steps`, `guidance_scale`, `strength`, `negative_prompt`, `rng_seed`, ...) and
OVMS's refusals, reworded only where OVMS's say less than they should. Beyond OVMS: `stream`
with `partial_images` (denoising previews as OpenAI's `image_generation.partial_image` events),
`output_format` png/jpeg/webp with `output_compression`, requests over `max_resolution` refused
(OVMS documents the limit but does not apply it), whole-number `guidance_scale` accepted (OVMS
refuses `7` and wants `7.0`), and `seed` as another name for `rng_seed`.

Responses are OpenAI's ImagesResponse with `b64_json` only (no URLs, as in OVMS) and the fields
its schema allows for any size; the stream's events carry the fields its schema requires.
"""

from __future__ import annotations

import base64
import io
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from PIL import Image

from servables.errors import InvalidRequest
from servables.image_gen.config import ImageGenConfig, Resolution
from servables.io.images.images import ImageLimits, decode_image, decode_mask
from servables.io.request_fields import RequestFields, is_number

OutputFormat = Literal["png", "jpeg", "webp"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("png", "jpeg", "webp")
MAX_PARTIAL_IMAGES = 3  # OpenAI's limit
MAX_SEED = 2**63 - 1  # what openvino-genai's generator takes
# The sizes OpenAI's schemas name; events report any other size as "auto".
SCHEMA_SIZES = ("1024x1024", "1024x1536", "1536x1024")
_SIZE = re.compile(r"^(-?\d+)x(-?\d+)$")
# Prompt fields passed to the pipeline as they are (OVMS's extensions).
TEXT_FIELDS = ("negative_prompt", "prompt_2", "prompt_3", "negative_prompt_2", "negative_prompt_3")
# OpenAI fields accepted with only the value that means what graphrt does anyway.
NEUTRAL_VALUES = {
    "quality": ("auto",),
    "background": ("auto", "opaque"),
    "moderation": ("auto", "low"),
}
IGNORED = ("user",)  # OpenAI's end-user id: nothing to do with it

ImageArray = npt.NDArray[np.uint8]


@dataclass
class ImageRequest:
    """A checked request; `image` (and `mask`) set for an edit."""

    model: str
    prompt: str
    edit: bool
    n: int
    size: Resolution | None  # None: the model's own
    steps: int
    seed: int | None = None
    guidance_scale: float | None = None
    strength: float | None = None
    max_sequence_length: int | None = None
    texts: dict[str, str] = field(default_factory=dict)
    lora_alphas: dict[str, float] | None = None
    output_format: OutputFormat = "png"
    output_compression: int | None = None
    stream: bool = False
    partial_images: int = 0
    image: ImageArray | None = None
    mask: ImageArray | None = None
    requested_size: str = "auto"

    @property
    def event_prefix(self) -> str:
        return "image_edit" if self.edit else "image_generation"


def _size(fields: RequestFields, config: ImageGenConfig) -> Resolution | None:
    size = fields.string("size")
    width = fields.integer("width")
    height = fields.integer("height")
    if size is not None and size != "auto":
        for name, value in (("width", width), ("height", height)):
            if value is not None:
                raise InvalidRequest(f"Key: {name} already exists in request options.", param=name)
        match = _SIZE.match(size)
        if match is None:
            raise InvalidRequest("size field is not in correct format - WxH", param="size")
        width, height = int(match[1]), int(match[2])
        if width <= 0 or height <= 0:
            raise InvalidRequest("size field values must be greater than 0", param="size")
    for name, value in (("width", width), ("height", height)):
        if value is not None and value <= 0:
            raise InvalidRequest(f"{name} must be higher than 0", param=name)
    if (width is None) != (height is None):
        missing = "height" if height is None else "width"
        raise InvalidRequest(f"{missing} is missing: give both width and height", param=missing)
    chosen = Resolution(width, height) if width and height else config.default_resolution
    if chosen is None and config.static_resolutions:
        chosen = config.static_resolutions[0]
    if chosen is None:
        return None
    param = "size" if size is not None else "width"
    if config.static_resolutions and chosen not in config.static_resolutions:
        sizes = ", ".join(map(str, config.static_resolutions))
        raise InvalidRequest(
            f"size {chosen} is not supported: the model is compiled for {sizes} only", param=param
        )
    if not chosen.fits(config.max_resolution):
        raise InvalidRequest(
            f"size {chosen} is larger than the maximum resolution {config.max_resolution}",
            param=param,
        )
    return chosen


def _count(fields: RequestFields, config: ImageGenConfig) -> int:
    n = fields.integer("n")
    per_prompt = fields.integer("num_images_per_prompt")
    if n is not None and per_prompt is not None:
        raise InvalidRequest(
            "Key: num_images_per_prompt already exists in request options.", param="n"
        )
    count = n if n is not None else per_prompt
    if count is None:
        count = config.static_images or 1
    if count <= 0:
        raise InvalidRequest("num_images_per_prompt/n must be higher than 0", param="n")
    if count > config.max_images:
        raise InvalidRequest(
            f"num_images_per_prompt/n is greater than maxNumImagesPerPrompt: {config.max_images}",
            param="n",
        )
    if config.static_images is not None and count != config.static_images:
        raise InvalidRequest(
            f"n must be {config.static_images}: the model is compiled for that many images",
            param="n",
        )
    return count


def _steps(fields: RequestFields, config: ImageGenConfig) -> int:
    steps = fields.integer("num_inference_steps")
    if steps is None:
        return config.default_steps
    if steps <= 0:
        raise InvalidRequest(
            "num_inference_steps must be higher than 0", param="num_inference_steps"
        )
    if steps > config.max_steps:
        raise InvalidRequest(
            f"num_inference_steps is greater than maxNumInferenceSteps: {config.max_steps}",
            param="num_inference_steps",
        )
    return steps


def _seed(fields: RequestFields) -> int | None:
    seeds = {
        name: fields.integer(name, minimum=0, maximum=MAX_SEED) for name in ("rng_seed", "seed")
    }
    if None not in seeds.values():
        raise InvalidRequest("Key: rng_seed already exists in request options.", param="seed")
    return seeds["rng_seed"] if seeds["rng_seed"] is not None else seeds["seed"]


def _lora_alphas(fields: RequestFields) -> dict[str, float] | None:
    value = fields.raw("lora_alphas")
    if value is None:
        return None
    if isinstance(value, str) and fields.form:
        try:
            value = json.loads(value)
        except ValueError:
            raise InvalidRequest(
                "lora_alphas field must be valid JSON", param="lora_alphas"
            ) from None
    if not isinstance(value, dict):
        raise InvalidRequest("lora_alphas must be an object", param="lora_alphas")
    alphas: dict[str, float] = {}
    for key, alpha in value.items():
        if not is_number(alpha):
            raise InvalidRequest(
                f"lora_alphas value for '{key}' must be a number", param="lora_alphas"
            )
        alphas[key] = float(alpha)
    return alphas


def _common(fields: RequestFields, config: ImageGenConfig, edit: bool) -> ImageRequest:
    """The fields generations and edits share, in OVMS's order of checks."""
    model = fields.string("model") or config.name
    prompt = fields.string("prompt", required=True)
    assert prompt is not None
    response_format = fields.string("response_format")
    if response_format is not None and response_format != "b64_json":
        raise InvalidRequest(
            f"Unsupported response_format: {response_format}. Only b64_json is supported.",
            param="response_format",
        )
    texts = {name: text for name in TEXT_FIELDS if (text := fields.string(name)) is not None}
    size_text = fields.string("size") or "auto"
    request = ImageRequest(
        model=model,
        prompt=prompt,
        edit=edit,
        n=_count(fields, config),
        size=_size(fields, config),
        steps=_steps(fields, config),
        seed=_seed(fields),
        guidance_scale=fields.number("guidance_scale"),
        max_sequence_length=fields.integer("max_sequence_length", minimum=1),
        texts=texts,
        lora_alphas=_lora_alphas(fields),
        output_format=fields.choice("output_format", OUTPUT_FORMATS, "png"),  # type: ignore[arg-type]
        output_compression=fields.integer("output_compression", minimum=0, maximum=100),
        stream=bool(fields.boolean("stream")),
        partial_images=fields.integer("partial_images", minimum=0, maximum=MAX_PARTIAL_IMAGES) or 0,
        requested_size=size_text,
    )
    if (
        config.static_guidance_scale is not None
        and request.guidance_scale is not None
        and request.guidance_scale != config.static_guidance_scale
    ):
        raise InvalidRequest(
            f"guidance_scale must be {config.static_guidance_scale:g}: the model is compiled "
            "for it",
            param="guidance_scale",
        )
    for name, allowed in NEUTRAL_VALUES.items():
        value = fields.string(name)
        if value is not None and value not in allowed:
            raise InvalidRequest(
                f"{name} {value!r} is not supported (accepted: {', '.join(allowed)})", param=name
            )
    return request


def parse_generation(body: Any, config: ImageGenConfig) -> ImageRequest:
    """A `/images/generations` JSON body."""
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    fields = RequestFields(body)
    request = _common(fields, config, edit=False)
    if "strength" in fields:
        raise InvalidRequest(
            "strength applies to /images/edits only (it sets how much of the image changes)",
            param="strength",
        )
    fields.refuse_unused(IGNORED)
    return request


def parse_edit(fields: RequestFields, config: ImageGenConfig, limits: ImageLimits) -> ImageRequest:
    """An `/images/edits` multipart form: `image` (one file) and an optional `mask`."""
    request = _common(fields, config, edit=True)
    request.strength = fields.number("strength")
    if request.strength is not None and request.strength > 1:
        raise InvalidRequest("strength is greater than maxStrength: 1", param="strength")
    if request.strength is not None and request.strength < 0:
        raise InvalidRequest("strength is less than minStrength: 0", param="strength")
    images = fields.files("image", required=True)
    if len(images) != 1:
        raise InvalidRequest(f"image: send one image to edit (got {len(images)})", param="image")
    request.image = decode_image(images[0].data, limits, param="image")
    masks = fields.files("mask")
    if len(masks) > 1:
        raise InvalidRequest(f"mask: send one mask (got {len(masks)})", param="mask")
    if masks:
        mask = decode_mask(masks[0].data, limits, param="mask")
        if mask.shape[:2] != request.image.shape[:2]:
            height, width = request.image.shape[:2]
            raise InvalidRequest(
                f"mask is {mask.shape[1]}x{mask.shape[0]} but the image is {width}x{height}: "
                "they must be the same size",
                param="mask",
            )
        request.mask = mask
    fields.refuse_unused(IGNORED)
    return request


# ------------------------------------------------------------------------------------ responses


def encode_image(pixels: ImageArray, output_format: OutputFormat, compression: int | None) -> str:
    """One (height, width, 3) uint8 image as base64 text of `output_format`."""
    buffer = io.BytesIO()
    image = Image.fromarray(pixels, mode="RGB")
    if output_format == "png":
        image.save(buffer, format="PNG")
    else:
        quality = 100 - (compression if compression is not None else 0)
        image.save(buffer, format=output_format.upper(), quality=max(1, quality))
    return base64.b64encode(buffer.getvalue()).decode("ascii")


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int

    def body(self) -> dict[str, Any]:
        return {
            "total_tokens": self.prompt_tokens,
            "input_tokens": self.prompt_tokens,
            "output_tokens": 0,
            "input_tokens_details": {"text_tokens": self.prompt_tokens, "image_tokens": 0},
        }


def response_body(
    request: ImageRequest, images: Sequence[str], usage: Usage, created: int | None = None
) -> dict[str, Any]:
    """OpenAI's ImagesResponse for base64 images."""
    return {
        "created": int(time.time()) if created is None else created,
        "data": [{"b64_json": image} for image in images],
        "background": "opaque",
        "output_format": request.output_format,
        "usage": usage.body(),
    }


def _event(request: ImageRequest, kind: str, image: str) -> dict[str, Any]:
    return {
        "type": f"{request.event_prefix}.{kind}",
        "b64_json": image,
        "created_at": int(time.time()),
        "size": request.requested_size if request.requested_size in SCHEMA_SIZES else "auto",
        "quality": "auto",
        "background": "opaque",
        "output_format": request.output_format,
    }


def partial_image_event(request: ImageRequest, image: str, index: int) -> dict[str, Any]:
    return {**_event(request, "partial_image", image), "partial_image_index": index}


def completed_event(request: ImageRequest, image: str, usage: Usage) -> dict[str, Any]:
    return {**_event(request, "completed", image), "usage": usage.body()}


def preview_steps(steps: int, partial_images: int) -> list[int]:
    """The denoising steps (0-based) after which a stream sends a preview: spread evenly,
    the last one before the final step (whose image is the completed one)."""
    if partial_images <= 0 or steps <= 1:
        return []
    count = min(partial_images, steps - 1)
    return sorted({(steps * (index + 1)) // (count + 1) - 1 for index in range(count)})
