"""KServe binary inputs: encoded images (JPEG, PNG, ...) sent as BYTES, decoded into a model's
4-dimensional input with OVMS's rules (docs/binary_input_kfs.md,
docs/binary_input_layout_and_shape.md).

- A BYTES input sent to a model input of rank 4 that is not a string input carries one encoded
  image per element; its shape is `[N]`, the number of images, which must fit the input's batch.
- The images are decoded as OpenCV decodes them for OVMS, channels unchanged: gray stays one
  channel, colour becomes BGR (BGRA with alpha), 8 or 16 bits; then cast to the input's element
  type (values unscaled, 0-255 for 8 bits) and stacked in NHWC order. The input's layout must
  therefore fit `N...HWC`: a model that takes NCHW is served with `layout: "NHWC:NCHW"`, which
  builds the transposition into it (and `mean`/`scale`/`color_format` the rest).
- Images are resized (bilinear) to the input's height and width only when the input's layout is
  `NHWC` or not set at all and no dimension but the batch is fully dynamic (OVMS counts the
  batch too, but its `batch_size: auto` keeps the model static and reloads it, where graphrt
  makes the batch dynamic); a dimension with bounds takes the image's size clamped to them, a
  dynamic one the first image's. Otherwise every image must have the input's size, and all the
  first image's.

Decoding uses Pillow instead of OpenCV, so a resized image can differ from OVMS's in the last
bit, and Pillow's bilinear filter smooths when it shrinks an image, as OpenCV's does not.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from servables.errors import InvalidRequest

Array = np.ndarray[Any, Any]
IMAGE_RANK = 4


@dataclass(frozen=True)
class Dim:
    """A dimension's bounds; `high` -1 is unbounded."""

    low: int
    high: int

    @property
    def static(self) -> bool:
        return self.low == self.high

    @property
    def any(self) -> bool:
        return self.low == 0 and self.high == -1

    def fits(self, size: int) -> bool:
        return size >= self.low and (self.high == -1 or size <= self.high)

    def target(self, size: int) -> int:
        """The size an image of `size` is resized to (clamped into the bounds)."""
        if self.fits(size):
            return size
        return self.low if size < self.low else self.high

    def __str__(self) -> str:
        if self.static:
            return str(self.low)
        return "-1" if self.any else f"{self.low}:{'' if self.high == -1 else self.high}"


@dataclass(frozen=True)
class ImageInput:
    """What a model input needs of decoded images (see the module docstring)."""

    name: str
    dtype: np.dtype[Any]
    layout: str  # OpenVINO's form, e.g. "[N,H,W,C]"; "" when the input has none
    batch: Dim | None  # None: the layout names no batch dimension
    height: Dim
    width: Dim
    channels: Dim
    nhwc: bool  # the layout fits N...HWC
    resizable: bool

    @classmethod
    def of(cls, port: Any, dtype: np.dtype[Any]) -> ImageInput | None:
        """For a model input port that can take images (rank 4, not strings), else None."""
        import openvino
        from openvino import layout_helpers as helpers

        shape = port.get_partial_shape()
        if shape.rank.is_dynamic or len(shape) != IMAGE_RANK or dtype.kind in "OSU":
            return None
        dims = [Dim(d.get_min_length(), d.get_max_length()) for d in shape]
        layout = port.get_node().get_layout()
        # Each dimension the layout names must sit where NHWC has it (from either end).
        positions = (
            (helpers.has_batch, helpers.batch_idx, (0, -4)),
            (helpers.has_height, helpers.height_idx, (1, -3)),
            (helpers.has_width, helpers.width_idx, (2, -2)),
            (helpers.has_channels, helpers.channels_idx, (3, -1)),
        )
        nhwc = all(not has(layout) or index(layout) in allowed for has, index, allowed in positions)
        unspecified = layout.empty or layout == openvino.Layout("...")
        text = "" if layout.empty else layout.to_string()
        return cls(
            name=port.get_any_name(),
            dtype=dtype,
            layout=text,
            batch=dims[0] if unspecified or helpers.has_batch(layout) else None,
            height=dims[1],
            width=dims[2],
            channels=dims[3],
            nhwc=nhwc,
            resizable=(unspecified or layout == openvino.Layout("NHWC"))
            and not any(d.any for d in dims[1:]),
        )


def _refuse(name: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=name)


def decode_image(data: bytes, name: str, index: int) -> Array:
    """One encoded image as an HxWxC array, channels as OpenCV decodes them (BGR order)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            mode = image.mode
            if mode == "1":
                image = image.convert("L")
            elif mode == "P":
                image = image.convert("RGBA" if "transparency" in image.info else "RGB")
            elif mode in ("LA", "PA"):
                image = image.convert("RGBA")
            elif mode not in ("L", "RGB", "RGBA", "I", "F") and not mode.startswith("I;16"):
                image = image.convert("RGB")
            pixels = np.asarray(image)
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        reason = "" if isinstance(error, UnidentifiedImageError) else f" ({error})"
        raise _refuse(
            name,
            f"Image parsing failed: element {index} of input {name} is not an image that can be "
            f"decoded (JPEG, PNG, BMP, ...){reason}",
        ) from error
    if pixels.ndim == 2:
        if pixels.dtype == np.int32:  # a 16-bit PNG that Pillow opened as "I"
            pixels = pixels.astype(np.uint16)
        return pixels[:, :, None]
    return np.ascontiguousarray(pixels[:, :, [2, 1, 0, 3][: pixels.shape[2]]])


def _resized(pixels: Array, height: int, width: int) -> Array:
    from PIL import Image

    if pixels.shape[0] == height and pixels.shape[1] == width:
        return pixels
    bilinear = Image.Resampling.BILINEAR
    planes = [
        np.asarray(Image.fromarray(pixels[:, :, c]).resize((width, height), bilinear))
        for c in range(pixels.shape[2])
    ]
    return np.stack(planes, axis=2)


def decode_images(items: Array, shape: list[int], spec: ImageInput) -> Array:
    """A request's BYTES elements for `spec` as one NHWC array of the input's element type."""
    name = spec.name
    if len(shape) != 1:
        raise _refuse(
            name,
            f"Invalid number of shape dimensions of input {name}: encoded images are sent with "
            f"shape [N], the number of images; got {shape}",
        )
    if not spec.nhwc:
        raise _refuse(
            name,
            f"Received binary image input {name} but the model input is not configured to accept "
            f"NHWC layout (its layout is {spec.layout}); serve the model with a layout such as "
            "NHWC:NCHW",
        )
    count = len(items)
    if spec.batch is None:
        raise _refuse(name, f"Invalid input batch size: the layout of input {name} has no batch")
    if count == 0 or not spec.batch.fits(count):
        raise _refuse(
            name,
            f"Invalid input batch size of input {name}: expected {spec.batch}, got {count} images",
        )
    images: list[Array] = []
    height = width = 0
    for index, data in enumerate(items.ravel()):
        pixels = decode_image(bytes(data), name, index)
        rows, cols, channels = pixels.shape
        if images and not spec.resizable and (rows, cols) != images[0].shape[:2]:
            raise _refuse(
                name,
                f"Binary input images of input {name} are required to have the same resolution: "
                f"image 0 is {images[0].shape[1]}x{images[0].shape[0]}, image {index} is "
                f"{cols}x{rows} (width x height)",
            )
        wanted = spec.channels
        if wanted.any and images:  # any number of channels, but all the first image's
            wanted = Dim(images[0].shape[2], images[0].shape[2])
        if not wanted.fits(channels):
            raise _refuse(
                name,
                f"Invalid number of channels in binary input {name}: image {index} has "
                f"{channels}, the input takes {wanted}",
            )
        if index == 0:
            height, width = spec.height.target(rows), spec.width.target(cols)
        if (rows, cols) != (height, width):
            if not spec.resizable:
                raise _refuse(
                    name,
                    f"Invalid input shape of input {name}: image {index} is {cols}x{rows}, the "
                    f"input takes {width}x{height} (width x height); images are resized only for "
                    "an input whose layout is NHWC (e.g. serve the model with layout "
                    "NHWC:NCHW)",
                )
            pixels = _resized(pixels, height, width)
        images.append(pixels)
    try:
        return np.stack(images).astype(spec.dtype, copy=False)
    except (TypeError, ValueError) as error:
        raise _refuse(name, f"Invalid input precision of input {name}: {error}") from error


def decode_image_inputs(
    inputs: Mapping[str, Array], image_inputs: Mapping[str, ImageInput | None]
) -> Mapping[str, Array]:
    """The request's inputs with every BYTES input sent to a numeric model input (a key of
    `image_inputs`) decoded; the same mapping when there is none."""
    if not any(a.dtype.kind == "O" and n in image_inputs for n, a in inputs.items()):
        return inputs
    decoded = dict(inputs)
    for name, array in inputs.items():
        if array.dtype.kind != "O" or name not in image_inputs:
            continue
        spec = image_inputs[name]
        if spec is None:
            raise _refuse(
                name,
                f"Input {name} got BYTES, which are taken as encoded images only by inputs of 4 "
                "dimensions",
            )
        decoded[name] = decode_images(array, list(array.shape), spec)
    return decoded
