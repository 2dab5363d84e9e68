"""KServe binary inputs: encoded images sent as BYTES to a model's 4-dimensional input, decoded
with OVMS's rules (layout, channels, batch, resizing). Answers are compared with the original
model run directly with openvino on the pixels Pillow decodes, in BGR order as OpenCV gives
them to OVMS."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from servables.errors import InvalidRequest
from servables.ov_model.images import Dim
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.preprocessing import Preprocessing

Array = np.ndarray[Any, Any]
RNG = np.random.default_rng(0)


def encoded(pixels: Array, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels.squeeze()).save(buffer, fmt)
    return buffer.getvalue()


def images(*items: bytes) -> Array:
    return np.array(list(items), dtype=object)


def run_directly(xml: Path, x: Array) -> Array:
    import openvino as ov

    compiled = ov.Core().compile_model(str(xml), "CPU")
    return np.asarray(compiled.create_infer_request().infer({0: x})[compiled.output(0)])


def loaded(folder: Path, **options: Any) -> OpenVINOModel:
    preprocessing = Preprocessing.from_options(options.pop("layout", None))
    model = OpenVINOModel("m", 1, folder, preprocessing=preprocessing, **options)
    model.load()
    model.start()
    return model


@pytest.fixture
def nhwc_model(tmp_path: Path, classic_models: Any) -> tuple[Path, OpenVINOModel]:
    """The NCHW image model served with layout NHWC:NCHW (as OVMS's docs advise)."""
    xml = classic_models.image_model(tmp_path)
    return xml, loaded(tmp_path, layout="NHWC:NCHW", batch_size="2")


async def test_images_are_resized_to_the_input_and_given_in_bgr(
    nhwc_model: tuple[Path, OpenVINOModel],
) -> None:
    xml, model = nhwc_model
    first = RNG.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    second = RNG.integers(0, 256, (6, 5, 3), dtype=np.uint8)  # each image is resized on its own
    result = (await model.infer({"data": images(encoded(first), encoded(second, "BMP"))}))["prob"]
    resized = [
        np.asarray(Image.fromarray(p).resize((8, 8), Image.Resampling.BILINEAR))[..., ::-1]
        for p in (first, second)
    ]
    for index, pixels in enumerate(resized):
        nchw = pixels.astype(np.float32).transpose(2, 0, 1)[None]
        np.testing.assert_allclose(result[index], run_directly(xml, nchw)[0], rtol=1e-6)


async def test_a_jpeg_is_decoded_as_pillow_decodes_it(
    nhwc_model: tuple[Path, OpenVINOModel],
) -> None:
    xml, model = nhwc_model
    jpeg = encoded(RNG.integers(0, 256, (8, 8, 3), dtype=np.uint8), "JPEG")
    pixels = np.asarray(Image.open(io.BytesIO(jpeg)))[..., ::-1].astype(np.float32)
    result = (await model.infer({"data": images(jpeg, jpeg)}))["prob"]
    np.testing.assert_allclose(result[0], run_directly(xml, pixels.transpose(2, 0, 1)[None])[0])


@pytest.mark.parametrize(
    ("items", "shape", "message"),
    [
        ([b"not an image"] * 2, None, "Image parsing failed: element 0 of input data"),
        (
            [encoded(np.zeros((8, 8), np.uint8))] * 2,
            None,
            "channels in binary input data: image 0 has 1",
        ),
        ([encoded(np.zeros((8, 8, 4), np.uint8))] * 2, None, "image 0 has 4, the input takes 3"),
        (
            [encoded(np.zeros((8, 8, 3), np.uint8))],
            None,
            "batch size of input data: expected 2, got 1",
        ),
        ([encoded(np.zeros((8, 8, 3), np.uint8))] * 2, [1, 2], "sent with shape \\[N\\]"),
    ],
)
async def test_bad_images_are_refused_naming_the_input(
    nhwc_model: tuple[Path, OpenVINOModel], items: list[bytes], shape: Any, message: str
) -> None:
    _, model = nhwc_model
    array = images(*items)
    with pytest.raises(InvalidRequest, match=message) as refused:
        await model.infer({"data": array.reshape(shape) if shape else array})
    assert refused.value.param == "data"


async def test_without_an_nhwc_layout_images_must_fit_as_they_are(
    tmp_path: Path, classic_models: Any
) -> None:
    xml = classic_models.save_ir(tmp_path)  # [1, 4, 4, 3], no layout: OVMS's N...
    model = loaded(tmp_path)
    pixels = RNG.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    result = (await model.infer({"x": images(encoded(pixels))}))["y"]
    bgr = pixels[..., ::-1].astype(np.float32)[None]
    np.testing.assert_allclose(result, run_directly(xml, bgr))
    with pytest.raises(InvalidRequest, match="images are resized only for an input whose layout"):
        await model.infer({"x": images(encoded(np.zeros((5, 5, 3), np.uint8)))})


async def test_an_nchw_input_does_not_take_images(tmp_path: Path, classic_models: Any) -> None:
    classic_models.image_model(tmp_path)
    model = loaded(tmp_path, layout="NCHW")
    with pytest.raises(InvalidRequest, match="not configured to accept NHWC layout"):
        await model.infer({"data": images(encoded(np.zeros((8, 8, 3), np.uint8)))})


async def test_bytes_for_an_input_that_is_not_an_image(tmp_path: Path) -> None:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3], ov.Type.f32, name="x")
    ov.save_model(ov.Model([ops.result(ops.abs(x))], [x], "flat"), tmp_path / "model.xml")
    model = loaded(tmp_path)
    with pytest.raises(InvalidRequest, match="encoded images only by inputs of 4 dimensions"):
        await model.infer({"x": images(b"abc")})


async def test_a_16_bit_png_keeps_its_values(tmp_path: Path) -> None:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 2, 2, 1], ov.Type.f32, name="x")
    ov.save_model(ov.Model([ops.result(ops.abs(x))], [x], "gray"), tmp_path / "model.xml")
    model = loaded(tmp_path)
    pixels = np.array([[0, 1000], [40000, 65535]], np.uint16)
    result = (await model.infer({"x": images(encoded(pixels))}))[model.outputs[0].name]
    assert result.ravel().tolist() == [0, 1000, 40000, 65535]


def test_bounded_dimensions_clamp_the_size() -> None:
    bounded = Dim(100, 200)
    assert (bounded.target(90), bounded.target(150), bounded.target(220)) == (100, 150, 200)
    assert Dim(0, -1).target(37) == 37 and str(Dim(0, -1)) == "-1" and str(bounded) == "100:200"
