"""OVMS's model parameters `layout`, `mean`, `scale`, `color_format` and `precision`, applied with
OpenVINO's PrePostProcessor, as OVMS applies them.

The values are OVMS's strings, from the command line or config.json (where numbers and lists
are taken too):

- `layout`: `NHWC:NCHW` means clients send NHWC and the model takes NCHW, so a transposition is
  built into the model; `NHWC` alone only names the dimensions (which one is the batch). One
  string applies to a model with one input; an object `{"input": "NHWC:NCHW", "output":
  "CN:NC"}` sets inputs and outputs by name. Inputs left out keep the layout the model file
  declares, else get OVMS's default `N...` (the first dimension is the batch).
- `color_format`: `BGR:RGB` means clients send RGB and the model takes BGR (OVMS's order: the
  model's format first, unlike `layout`); RGB, BGR, GRAY, NV12, NV12_2, I420, I420_3.
- `precision`: `UINT8:FP32` means clients send uint8 and the model takes fp32.
- `mean` and `scale`: one number, or one per channel as `[123.7,116.3,103.5]`; `(x - mean) /
  scale` after the colour and type conversions, on the layout's `C` dimension.

mean, scale, color_format and precision apply to a model with one input (OVMS's rule). The steps
run in OVMS's order: layouts, colour, element type, mean, scale; a shape or batch size set in the
same config then applies to the model as clients see it (after the layout change).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from servables.errors import ServableLoadError

logger = logging.getLogger(__name__)

LAYOUT_CHARACTERS = set("NCHWD?.")
# OVMS's names -> openvino.preprocess.ColorFormat members.
COLOR_FORMATS = {
    "RGB": "RGB",
    "BGR": "BGR",
    "GRAY": "GRAY",
    "NV12": "NV12_SINGLE_PLANE",
    "NV12_2": "NV12_TWO_PLANES",
    "I420": "I420_SINGLE_PLANE",
    "I420_3": "I420_THREE_PLANES",
}
# OVMS's names -> OpenVINO element types.
PRECISIONS = {
    "BF16": "bf16",
    "FP64": "f64",
    "FP32": "f32",
    "FP16": "f16",
    "INT64": "i64",
    "INT32": "i32",
    "INT16": "i16",
    "INT8": "i8",
    "INT4": "i4",
    "UINT64": "u64",
    "UINT32": "u32",
    "UINT16": "u16",
    "UINT8": "u8",
    "UINT4": "u4",
    "UINT1": "u1",
}

Values = float | tuple[float, ...]


@dataclass(frozen=True)
class LayoutSetting:
    """One `layout` value: what clients send (`tensor`) and what the model takes."""

    tensor: str
    model: str

    @classmethod
    def parse(cls, text: str) -> LayoutSetting:
        cleaned = "".join(text.split()).upper()
        parts = cleaned.split(":")
        if (
            not cleaned
            or len(parts) > 2
            or not all(parts)
            or set(cleaned) - LAYOUT_CHARACTERS - {":"}
        ):
            raise ValueError(
                f"layout {text!r} is not a layout such as NCHW or NHWC:NCHW (letters N, C, H, W, "
                "D, ? and ...)"
            )
        return cls(parts[0], parts[-1])

    def __str__(self) -> str:
        return self.model if self.tensor == self.model else f"{self.tensor}:{self.model}"


def _pair(text: Any, names: Mapping[str, str], option: str) -> tuple[str, str]:
    if not isinstance(text, str) or text.upper().count(":") != 1:
        raise ValueError(f"{option} {text!r} must be TARGET:SOURCE, e.g. " + _example(option))
    first, second = (part.strip().upper() for part in text.split(":"))
    for part in (first, second):
        if part not in names:
            raise ValueError(
                f"{option} {text!r}: {part or '(empty)'} is not one of " + ", ".join(names)
            )
    return first, second


def _example(option: str) -> str:
    return "BGR:RGB" if option == "color_format" else "UINT8:FP32"


def _values(value: Any, option: str) -> Values | None:
    """OVMS's float-or-array: 0.5, "0.5", "[1,2,3]", "(1,2,3)" or a JSON list."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{option} must be a number or a list of numbers, not {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = "".join(value.split())
        if text[:1] + text[-1:] in ("[]", "()"):
            value = [part for part in text[1:-1].split(",")]
        else:
            value = text
    try:
        if isinstance(value, list | tuple):
            if not value:
                raise ValueError
            return tuple(float(item) for item in value)
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"{option} {value!r} must be a number or a list of numbers such as [0.5,0.5,0.5]"
        ) from None


def _layouts(value: Any) -> tuple[LayoutSetting | None, dict[str, LayoutSetting]]:
    if value is None or value == "":
        return None, {}
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError as error:
            raise ValueError(f"layout is not valid JSON: {error}") from error
    if isinstance(value, str):
        return LayoutSetting.parse(value), {}
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        return None, {str(name): LayoutSetting.parse(text) for name, text in value.items()}
    raise ValueError('layout must be a string such as "NHWC:NCHW" or an object of them by name')


@dataclass(frozen=True)
class Preprocessing:
    """See the module docstring."""

    layout: LayoutSetting | None = None  # the one input's
    layouts: Mapping[str, LayoutSetting] = field(default_factory=dict)  # by input/output name
    mean: Values | None = None
    scale: Values | None = None
    color_format: tuple[str, str] | None = None  # (the model's, what clients send)
    precision: tuple[str, str] | None = None  # (what clients send, the model's)

    @classmethod
    def from_options(
        cls,
        layout: Any = None,
        mean: Any = None,
        scale: Any = None,
        color_format: Any = None,
        precision: Any = None,
    ) -> Preprocessing:
        """Parse OVMS's values; ValueError names the option."""
        single, by_name = _layouts(layout)
        return cls(
            layout=single,
            layouts=by_name,
            mean=_values(mean, "mean"),
            scale=_values(scale, "scale"),
            color_format=None
            if color_format in (None, "")
            else _pair(color_format, COLOR_FORMATS, "color_format"),
            precision=None
            if precision in (None, "")
            else _pair(precision, PRECISIONS, "precision"),
        )

    @property
    def _one_input_steps(self) -> list[str]:
        steps = {
            "layout": self.layout,
            "mean": self.mean,
            "scale": self.scale,
            "color_format": self.color_format,
            "precision": self.precision,
        }
        return [name for name, value in steps.items() if value is not None]

    def apply(self, model: Any, where: str) -> Any:
        """The model with these steps built in (OpenVINO's PrePostProcessor), and every input's
        layout set (its own, or `N...`) so that a batch size can find the batch dimension."""
        import openvino
        from openvino.preprocess import ColorFormat, PrePostProcessor

        inputs = list(model.inputs)
        one_input = self._one_input_steps
        if one_input and len(inputs) != 1:
            raise ServableLoadError(
                f"{where}: {', '.join(one_input)} apply to a model with one input, and this one "
                f"has {len(inputs)}; give layout as an object by input name"
            )
        names = {name for port in [*inputs, *model.outputs] for name in port.get_names()}
        for name in self.layouts:
            if name not in names:
                raise ServableLoadError(
                    f"{where}: layout names {name!r}, which is not an input or output of the "
                    "model (" + ", ".join(sorted(names)) + ")"
                )
        try:
            ppp = PrePostProcessor(model)
            for port in inputs:
                step = ppp.input(port.get_any_name())
                setting = self.layout or _named(self.layouts, port.get_names())
                if setting is not None:
                    step.tensor().set_layout(openvino.Layout(setting.tensor))
                    step.model().set_layout(openvino.Layout(setting.model))
                else:
                    step.model().set_layout(_model_layout(port))
            for port in model.outputs:
                setting = _named(self.layouts, port.get_names())
                if setting is not None:
                    output = ppp.output(port.get_any_name())
                    output.tensor().set_layout(openvino.Layout(setting.tensor))
                    output.model().set_layout(openvino.Layout(setting.model))
            if one_input:
                only = ppp.input()
                if self.color_format is not None:
                    target, source = self.color_format
                    only.tensor().set_color_format(getattr(ColorFormat, COLOR_FORMATS[source]))
                    only.preprocess().convert_color(getattr(ColorFormat, COLOR_FORMATS[target]))
                if self.precision is not None:
                    sent, taken = (getattr(openvino.Type, PRECISIONS[p]) for p in self.precision)
                    only.tensor().set_element_type(sent)
                    only.preprocess().convert_element_type(taken)
                if self.mean is not None:
                    only.preprocess().mean(_ov_values(self.mean))
                if self.scale is not None:
                    only.preprocess().scale(_ov_values(self.scale))
            built = ppp.build()
        except (RuntimeError, TypeError, ValueError) as error:
            raise ServableLoadError(
                f"{where}: cannot apply layout or preprocessing: {error}"
            ) from error
        logger.debug("%s: preprocessing built into the model:\n%s", where, ppp)
        return built


def _named(layouts: Mapping[str, LayoutSetting], names: set[str]) -> LayoutSetting | None:
    return next((layouts[name] for name in sorted(names) if name in layouts), None)


def _model_layout(port: Any) -> Any:
    """The layout the model file declares for an input, else OVMS's default (`N...`, or `...`
    for a scalar or an input of unknown rank)."""
    import openvino

    declared = port.get_node().get_layout()
    if not declared.empty:
        return declared
    rank = port.get_partial_shape().rank
    return openvino.Layout("N..." if rank.is_static and rank.get_length() > 0 else "...")


def _ov_values(values: Values) -> float | list[float]:
    return list(values) if isinstance(values, tuple) else values
