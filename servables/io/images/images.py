"""Decode untrusted image bytes into the RGB, HWC uint8 arrays openvino-genai takes.

The bytes come from clients, so decoding is defensive, and every refusal is an InvalidRequest
(a 400) naming the problem, never a crash, a warning or a stuck worker:

* Only JPEG, PNG, WebP, GIF (its first frame) and BMP are opened. Pillow's other plugins never see
  client bytes (some are large attack surfaces: EPS even runs Ghostscript).
* The pixel count is read from the header and checked before a single pixel is decoded. Above
  `max_pixels` (Pillow's decompression-bomb threshold, 89.5 MP, by default) the image is refused.
  Pillow itself only *warns* between that threshold and twice it; that warning is made an error
  for the whole process (`_refuse_bombs`), so no path lets a bomb through as a log line.
* Truncated or corrupt data is refused (Pillow's LOAD_TRUNCATED_IMAGES stays off).
* Images above `resize_pixels` (16.7 MP, 4096x4096) are scaled down to fit, aspect kept, before
  they reach the engine. The vision processors of the VLMs we serve shrink far below that anyway
  (Qwen2-VL to at most 12.8 MP by default, InternVL to 448-px tiles, Phi-3.5-vision to 336-px
  crops), so the answer barely changes, while the memory of the decode and the bytes sent to the
  engine process stay bounded (at most 48 MB per image). JPEGs are decoded at a reduced scale
  directly (libjpeg's DCT scaling), so an 80 MP photo never exists at full size.
* What the user sees is what the model sees: the EXIF orientation is applied and transparency is
  composited over white, as transformers' `load_image` / `convert_to_rgb` do.
"""

from __future__ import annotations

import io
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageOps, UnidentifiedImageError

from servables.errors import InvalidRequest

FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP")
FORMAT_NAMES = "JPEG, PNG, WebP, GIF or BMP"
PARSING_FAILED = "Image parsing failed"  # OVMS's message; ours adds the reason

ImageArray = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class ImageLimits:
    """Size limits for one image (see the module docstring)."""

    max_bytes: int = 20_000_000  # encoded size; OVMS's MAX_IMAGE_SIZE_BYTES
    max_pixels: int = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS default; above: refused
    resize_pixels: int = 4096 * 4096  # above: scaled down to fit


_bomb_filter_lock = threading.Lock()


def _refuse_bombs() -> None:
    """Make Pillow's DecompressionBombWarning an exception, once per process (idempotent).

    Decoding runs in worker threads, and `warnings.catch_warnings` is not thread-safe, so the
    filter is installed globally rather than around each decode. Re-checked on every call because
    test runners reset the filter list between tests.
    """
    category = Image.DecompressionBombWarning
    with _bomb_filter_lock:
        for action, _message, kind, _module, _line in warnings.filters:
            if action == "error" and kind is category:
                return
        warnings.filterwarnings("error", category=category)


def _refuse(reason: str, param: str | None) -> InvalidRequest:
    return InvalidRequest(f"{PARSING_FAILED}: {reason}", param=param)


def _fit(width: int, height: int, pixels: int) -> tuple[int, int]:
    """The largest size with the same aspect ratio and at most `pixels` pixels."""
    scale = (pixels / (width * height)) ** 0.5
    return max(1, int(width * scale)), max(1, int(height * scale))


def _to_rgb(image: Image.Image) -> Image.Image:
    if image.mode == "RGB":
        return image
    if image.mode.startswith("I;16"):  # 16-bit grayscale: keep the high byte, not a clipped low one
        high = (np.asarray(image, dtype=np.uint16) >> 8).astype(np.uint8)
        return Image.fromarray(high, mode="L").convert("RGB")
    if image.has_transparency_data:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def decode_image(
    data: bytes, limits: ImageLimits | None = None, *, param: str | None = None
) -> ImageArray:
    """RGB pixels of an encoded image as a (height, width, 3) uint8 array; see the module doc."""
    return _decode(data, limits or ImageLimits(), param, _to_rgb)


def _to_mask(image: Image.Image) -> Image.Image:
    """Where to repaint, white on black. A mask with transparency marks it by transparent pixels
    (OpenAI's convention); an opaque one by white pixels (diffusers' and OVMS's)."""
    if image.has_transparency_data:
        alpha = np.asarray(image.convert("RGBA"))[:, :, 3]
        repaint = np.where(alpha < 128, 255, 0).astype(np.uint8)
        return Image.fromarray(repaint, mode="L").convert("RGB")
    return _to_rgb(image).convert("L").convert("RGB")


def decode_mask(
    data: bytes, limits: ImageLimits | None = None, *, param: str | None = None
) -> ImageArray:
    """An inpainting mask as a (height, width, 3) uint8 array: 255 where the image is to be
    repainted, 0 where it is kept (see _to_mask); checked and bounded as decode_image."""
    return _decode(data, limits or ImageLimits(), param, _to_mask)


def _decode(
    data: bytes,
    limits: ImageLimits,
    param: str | None,
    convert: Callable[[Image.Image], Image.Image],
) -> ImageArray:
    if len(data) > limits.max_bytes:
        raise InvalidRequest(
            f"Image is larger than the limit of {limits.max_bytes} bytes", param=param
        )
    _refuse_bombs()
    try:
        image = Image.open(io.BytesIO(data), formats=FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        raise _refuse(f"the image is too large ({error})", param) from error
    except UnidentifiedImageError as error:
        raise _refuse(f"the data is not a {FORMAT_NAMES} image", param) from error
    except (OSError, SyntaxError, ValueError) as error:
        raise _refuse(f"the image header is corrupt ({error})", param) from error
    with image:
        width, height = image.size
        if width * height > limits.max_pixels:
            raise _refuse(
                f"the image is {width}x{height} pixels, over the limit of {limits.max_pixels} "
                "pixels (a decompression bomb?)",
                param,
            )
        target = None
        if width * height > limits.resize_pixels:
            target = _fit(width, height, limits.resize_pixels)
            if image.format in ("JPEG", "MPO"):
                image.draft("RGB", target)  # decode at 1/2, 1/4 or 1/8 scale, still >= target
        try:
            image.load()
            sides = image.size
            ImageOps.exif_transpose(image, in_place=True)  # no full-size copy when upright
            rgb = convert(image)
        except (OSError, SyntaxError, ValueError, EOFError) as error:
            raise _refuse(f"the image data is truncated or corrupt ({error})", param) from error
        if target is not None:
            if image.size != sides:  # EXIF rotation by 90 degrees swaps the sides
                target = _fit(rgb.width, rgb.height, limits.resize_pixels)
            rgb = rgb.resize(target, Image.Resampling.BICUBIC, reducing_gap=3.0)
        pixels = np.array(rgb, dtype=np.uint8)  # a writable, contiguous copy
    if pixels.ndim != 3 or pixels.shape[2] != 3 or pixels.size == 0:
        raise _refuse(f"unexpected decoded shape {pixels.shape}", param)
    return pixels
