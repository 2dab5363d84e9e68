"""OVMS's single-model parameters (docs/parameters.md): the settings of a classic model given on
the command line.

`graphrt serve --model_name resnet --model_path /models/resnet50 --layout NHWC:NCHW` serves the
model as `{"config": {"name": "resnet", "base_path": ..., "layout": "NHWC:NCHW"}}` in config.json
would, and `--add_to_config` writes the same entry, so both read the flags here.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from graphrt.server import StartupError

# The flags only classic models take, as config.json's keys; OVMS's help for each.
MODEL_OPTIONS = {
    "batch_size": "the model's batch size: a number, or auto (any); ignored when --shape is set",
    "shape": "input shapes: (1,3,224,224) for a model with one input, auto (any), or JSON by "
    'input name, {"in1": "(1,3,-1,-1)", "in2": "auto"}',
    "layout": "input layout, TARGET:SOURCE: NHWC:NCHW takes NHWC from clients for a model in "
    'NCHW; NHWC alone names the dimensions; JSON by input or output name, {"in": "NHWC:NCHW"}',
    "mean": "subtracted from the input: a number, or one per channel, [123.7,116.3,103.5]",
    "scale": "the input is divided by it: a number, or one per channel, [58.4,57.1,57.4]",
    "color_format": "colour conversion, MODEL:SENT, e.g. BGR:RGB when clients send RGB to a BGR "
    "model (RGB, BGR, GRAY, NV12, NV12_2, I420, I420_3)",
    "precision": "element type conversion, SENT:MODEL, e.g. UINT8:FP32 (FP64, FP32, FP16, BF16, "
    "INT64...INT4, UINT64...UINT1)",
    "model_version_policy": 'which versions to serve: {"latest": {"num_versions": 1}} (the '
    'default), {"all": {}} or {"specific": {"versions": [1, 3]}}',
    "nireq": "infer requests run at once (0: what OpenVINO finds optimal)",
}
# Values that are JSON objects when they start with "{" (written as objects to config.json).
JSON_OPTIONS = ("shape", "layout", "model_version_policy")


def add_classic_model_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "classic models (--model_path of an OpenVINO IR, ONNX, PaddlePaddle, TensorFlow or "
        "TensorFlow Lite model; also what --add_to_config writes)"
    )
    for option, help_text in MODEL_OPTIONS.items():
        group.add_argument(f"--{option}", type=int if option == "nireq" else str, help=help_text)


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The classic-model flags given, as config.json's `config` entry holds them."""
    options: dict[str, Any] = {}
    for option in MODEL_OPTIONS:
        value = getattr(args, option)
        if value is None:
            continue
        if option in JSON_OPTIONS and isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError as error:
                raise StartupError(f"--{option} is not valid JSON: {error}") from error
        options[option] = value
    if args.target_device != "CPU":
        options["target_device"] = args.target_device
    if args.plugin_config:
        try:
            options["plugin_config"] = json.loads(args.plugin_config)
        except ValueError as error:
            raise StartupError(f"--plugin_config is not valid JSON: {error}") from error
    return options
