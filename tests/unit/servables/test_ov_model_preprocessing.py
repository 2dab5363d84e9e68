"""OVMS's layout, mean, scale, color_format and precision parameters, built into real models
with OpenVINO's PrePostProcessor: each answer is compared with the original model run directly
with openvino on the input preprocessed in numpy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servables.errors import ServableLoadError
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.preprocessing import LayoutSetting, Preprocessing

Array = np.ndarray[Any, Any]


def run_directly(xml: Path, x: Array) -> Array:
    import openvino as ov

    compiled = ov.Core().compile_model(str(xml), "CPU")
    return np.asarray(compiled.create_infer_request().infer({0: x})[compiled.output(0)])


async def served(xml: Path, x: Array, **options: Any) -> tuple[OpenVINOModel, Array]:
    model = OpenVINOModel("m", 1, xml.parent, preprocessing=Preprocessing.from_options(**options))
    model.load()
    model.start()
    return model, (await model.infer({"data": x}))["prob"]


@pytest.mark.parametrize(
    ("text", "tensor", "model"),
    [("NHWC:NCHW", "NHWC", "NCHW"), ("nchw", "NCHW", "NCHW"), (" N...:N... ", "N...", "N...")],
)
def test_layouts_are_read_as_ovms_reads_them(text: str, tensor: str, model: str) -> None:
    assert LayoutSetting.parse(text) == LayoutSetting(tensor, model)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"layout": "NHWC:NCHW:N"}, "is not a layout"),
        ({"layout": "NXYZ"}, "is not a layout"),
        ({"layout": "{bad json"}, "layout is not valid JSON"),
        ({"mean": "[1,a,3]"}, "mean .* must be a number or a list of numbers"),
        ({"scale": True}, "scale must be a number"),
        ({"color_format": "RGB"}, "color_format 'RGB' must be TARGET:SOURCE"),
        ({"color_format": "RGB:HSV"}, "HSV is not one of RGB, BGR, GRAY"),
        ({"precision": "FP32:FP8"}, "FP8 is not one of BF16, FP64"),
    ],
)
def test_bad_values_name_the_parameter(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Preprocessing.from_options(**options)


def test_values_come_as_ovms_strings_or_as_json() -> None:
    parsed = Preprocessing.from_options(
        layout={"data": "nhwc:nchw"}, mean="[1, 2,3]", scale="(4,5,6)", precision="uint8:fp32"
    )
    assert parsed.layouts == {"data": LayoutSetting("NHWC", "NCHW")}
    assert (parsed.mean, parsed.scale, parsed.precision) == (
        (1, 2, 3),
        (4, 5, 6),
        ("UINT8", "FP32"),
    )
    assert Preprocessing.from_options(mean=255, scale="0.5") == Preprocessing(mean=255.0, scale=0.5)


async def test_layout_mean_scale_colour_and_precision_as_ovms_applies_them(
    tmp_path: Path, classic_models: Any
) -> None:
    xml = classic_models.image_model(tmp_path)
    pixels = np.random.default_rng(0).integers(0, 256, (1, 8, 8, 3), dtype=np.uint8)
    mean, scale = np.array([10, 20, 30], np.float32), np.array([2, 4, 8], np.float32)
    model, result = await served(
        xml,
        pixels,
        layout="NHWC:NCHW",
        mean="[10,20,30]",
        scale="[2,4,8]",
        color_format="BGR:RGB",  # clients send RGB, the model takes BGR
        precision="UINT8:FP32",
    )
    assert model.inputs[0].shape == (1, 8, 8, 3) and model.inputs[0].datatype == "UINT8"
    bgr = pixels[..., ::-1].astype(np.float32)
    expected = run_directly(xml, ((bgr - mean) / scale).transpose(0, 3, 1, 2))
    np.testing.assert_allclose(result, expected, rtol=1e-6)


async def test_a_shape_applies_after_the_layout_change(tmp_path: Path, classic_models: Any) -> None:
    xml = classic_models.image_model(tmp_path)
    x = np.ones((2, 8, 8, 3), np.float32)
    model = OpenVINOModel(
        "m", 1, tmp_path, shape="(-1,8,8,3)", preprocessing=Preprocessing.from_options("NHWC:NCHW")
    )
    model.load()
    model.start()
    assert model.inputs[0].shape == (-1, 8, 8, 3)
    result = (await model.infer({"data": x}))["prob"]
    np.testing.assert_allclose(result[1], run_directly(xml, x[:1].transpose(0, 3, 1, 2))[0])


async def test_batch_size_finds_the_batch_of_a_model_without_layouts(
    tmp_path: Path, classic_models: Any
) -> None:
    classic_models.image_model(tmp_path)
    model = OpenVINOModel("m", 1, tmp_path, batch_size="4")
    model.load()
    assert model.inputs[0].shape == (4, 3, 8, 8)  # OVMS's default layout N... names the batch


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"layout": {"nothing": "NHWC:NCHW"}}, "layout names 'nothing', which is not an input"),
        ({"mean": "[1,2,3]"}, "cannot apply layout or preprocessing"),  # no C in N...
    ],
)
def test_preprocessing_the_model_cannot_take_fails_its_load(
    tmp_path: Path, classic_models: Any, options: dict[str, Any], message: str
) -> None:
    classic_models.image_model(tmp_path)
    model = OpenVINOModel("m", 1, tmp_path, preprocessing=Preprocessing.from_options(**options))
    with pytest.raises(ServableLoadError, match=message):
        model.load()


def test_one_input_steps_refuse_a_model_with_several_inputs(tmp_path: Path) -> None:
    import openvino as ov
    import openvino.opset13 as ops

    a, b = (ops.parameter([1, 3], ov.Type.f32, name=n) for n in "ab")
    ov.save_model(ov.Model([ops.result(ops.add(a, b))], [a, b], "two"), tmp_path / "model.xml")
    model = OpenVINOModel("m", 1, tmp_path, preprocessing=Preprocessing.from_options(scale=2))
    with pytest.raises(ServableLoadError, match="scale apply to a model with one input"):
        model.load()
