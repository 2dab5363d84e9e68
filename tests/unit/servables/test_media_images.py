"""decode_image: formats, color modes, orientation, and every refusal as a 400 with its reason."""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any

import numpy as np
import pytest
from PIL import Image

from servables.errors import InvalidRequest
from servables.io.images.images import ImageLimits, decode_image


def noise(width: int, height: int, seed: int = 0) -> Any:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def encode(image: Image.Image, image_format: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=image_format, **options)
    return buffer.getvalue()


def refused(data: bytes, limits: ImageLimits | None = None) -> str:
    with pytest.raises(InvalidRequest) as caught:
        decode_image(data, limits, param="p")
    assert caught.value.param == "p"
    return caught.value.message


def png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


# ------------------------------------------------------------------------------------ accepted


def test_png_round_trip_is_exact() -> None:
    pixels = noise(40, 30)
    decoded = decode_image(encode(Image.fromarray(pixels), "PNG"))
    assert decoded.dtype == np.uint8 and decoded.shape == (30, 40, 3)
    assert decoded.flags.c_contiguous and decoded.flags.writeable
    assert np.array_equal(decoded, pixels)


@pytest.mark.parametrize("image_format", ["JPEG", "WEBP", "BMP", "GIF"])
def test_other_formats_decode_like_pillow(image_format: str) -> None:
    data = encode(Image.fromarray(noise(33, 21)), image_format)
    with Image.open(io.BytesIO(data)) as reference:
        expected = np.array(reference.convert("RGB"))
    assert np.array_equal(decode_image(data), expected)


def test_gif_uses_the_first_frame() -> None:
    first, second = noise(16, 16, 1), noise(16, 16, 2)
    frames = [Image.fromarray(first).quantize(), Image.fromarray(second).quantize()]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    with Image.open(io.BytesIO(data)) as reference:
        expected = np.array(reference.convert("RGB"))
    assert np.array_equal(decode_image(data), expected)


def test_transparency_is_composited_over_white() -> None:
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[..., 0] = 200  # red, fully transparent on the left half
    rgba[:, 2:, 3] = 255
    decoded = decode_image(encode(Image.fromarray(rgba, "RGBA"), "PNG"))
    assert (decoded[:, :2] == 255).all()
    assert (decoded[:, 2:] == [200, 0, 0]).all()


def test_palette_with_transparency() -> None:
    image = Image.new("P", (4, 4), 0)
    image.putpalette([0, 0, 0, 10, 20, 30] + [0] * 762)
    image.putpixel((0, 0), 1)
    decoded = decode_image(encode(image, "PNG", transparency=0))
    assert decoded[0, 0].tolist() == [10, 20, 30]
    assert decoded[1, 1].tolist() == [255, 255, 255]


def test_grayscale_and_16_bit_grayscale() -> None:
    gray = decode_image(encode(Image.new("L", (3, 2), 77), "PNG"))
    assert gray.shape == (2, 3, 3) and (gray == 77).all()
    deep = Image.fromarray(np.full((2, 3), 0x8000, dtype=np.uint16))
    assert (decode_image(encode(deep, "PNG")) == 0x80).all()


def test_exif_orientation_is_applied() -> None:
    pixels = noise(40, 20)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    data = encode(Image.fromarray(pixels), "JPEG", exif=exif, quality=95)
    assert decode_image(data).shape == (40, 20, 3)


@pytest.mark.parametrize("image_format", ["PNG", "JPEG"])
def test_images_over_the_resize_cap_are_scaled_down(image_format: str) -> None:
    limits = ImageLimits(resize_pixels=100 * 100)
    data = encode(Image.fromarray(noise(400, 200)), image_format)
    decoded = decode_image(data, limits)
    height, width, _ = decoded.shape
    assert width * height <= 100 * 100
    assert abs(width / height - 2.0) < 0.05
    assert width >= 140  # scaled to fit, not to an eighth


# ------------------------------------------------------------------------------------ refused


def test_not_an_image() -> None:
    assert refused(b"hello, world") == (
        "Image parsing failed: the data is not a JPEG, PNG, WebP, GIF or BMP image"
    )


@pytest.mark.parametrize("image_format", ["TIFF", "PPM", "ICO"])
def test_formats_outside_the_list_are_refused(image_format: str) -> None:
    data = encode(Image.fromarray(noise(16, 16)), image_format)
    assert refused(data).startswith("Image parsing failed: the data is not a JPEG")


def test_truncated_image() -> None:
    data = encode(Image.fromarray(noise(64, 64)), "PNG")
    assert refused(data[: len(data) // 2]).startswith(
        "Image parsing failed: the image data is truncated or corrupt"
    )


def test_over_our_pixel_limit() -> None:
    message = refused(png_header_only(200, 100), ImageLimits(max_pixels=10_000))
    assert message == (
        "Image parsing failed: the image is 200x100 pixels, over the limit of 10000 pixels "
        "(a decompression bomb?)"
    )


@pytest.mark.parametrize("side", [10_000, 20_000], ids=["pillow-warns", "pillow-raises"])
def test_pillow_decompression_bomb_is_a_refusal_not_a_warning(side: int) -> None:
    """Between 89.5 and 179 MP Pillow only warns; the limit is enforced either way."""
    message = refused(png_header_only(side, side))
    assert message.startswith("Image parsing failed: the image ")


def test_encoded_size_limit() -> None:
    data = encode(Image.fromarray(noise(64, 64)), "PNG")
    assert refused(data, ImageLimits(max_bytes=100)) == (
        "Image is larger than the limit of 100 bytes"
    )
