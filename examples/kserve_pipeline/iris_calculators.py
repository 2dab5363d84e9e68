"""The example's own calculators: plain Python around the model, referenced from graph.pbtxt.

`StandardizeCalculator` turns raw centimetres into what the model was trained on;
`TopClassCalculator` turns scores into a class name and its probability. graph.pbtxt names them
`iris_calculators:StandardizeCalculator` and `iris_calculators:TopClassCalculator`; the server
finds this module through `--python_path`. `IrisClassifier` packages the whole pipeline as a
subgraph, registered when the server imports this module (`--import iris_calculators`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calculators.openvino.openvino_calculators_pb2 import (
    OpenVINOModelServerSessionCalculatorOptions,
)
from graphruntime import (
    Calculator,
    CalculatorContext,
    Input,
    Output,
    SubgraphContext,
    register_subgraph,
)

CLASSES = np.array([b"setosa", b"versicolor", b"virginica"], dtype=object)
# Mean and standard deviation of each measurement in the training data.
MEAN = np.array([5.84, 3.06, 3.76, 1.20], dtype=np.float32)
STD = np.array([0.83, 0.44, 1.77, 0.76], dtype=np.float32)


class StandardizeCalculator(Calculator):
    """Raw measurements (any numeric dtype, [N, 4]) -> standardized FP32 features."""

    measurements = Input("", object)
    features = Output("", object)
    blocking = False  # cheap numpy work: run on the event loop, no thread hop

    def process(self, cc: CalculatorContext) -> None:
        raw = np.asarray(cc.inputs[self.measurements].payload, dtype=np.float32)
        if raw.ndim != 2 or raw.shape[1] != 4:
            raise ValueError(f"measurements must be [N, 4], got {list(raw.shape)}")
        cc.outputs[self.features].add((raw - MEAN) / STD)


class TopClassCalculator(Calculator):
    """Scores (an openvino.Tensor) -> class names (BYTES) and their softmax probabilities."""

    scores = Input("", object)
    label = Output("LABEL", object)
    probability = Output("PROBABILITY", object)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        scores: Any = cc.inputs[self.scores].payload.data
        exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = exp / exp.sum(axis=-1, keepdims=True)
        best = probabilities.argmax(axis=-1)
        cc.outputs[self.label].add(CLASSES[best])
        cc.outputs[self.probability].add(probabilities.max(axis=-1).astype(np.float32))


@register_subgraph
def IrisClassifier(context: SubgraphContext) -> str:
    """Measurements in, label and probability out: standardize, the model, top class.

    The model is the one the using node's options name (its servable_name); it reaches the
    OpenVINOClassifier subgraph (subgraphs/openvino_classifier.pbtxt) through that node's options.
    """
    options = context.options(OpenVINOModelServerSessionCalculatorOptions)
    if options is None or not options.servable_name:
        raise ValueError(
            "IrisClassifier needs OpenVINOModelServerSessionCalculatorOptions.servable_name"
        )
    return f"""
        type: "IrisClassifier"
        input_stream: "MEASUREMENTS:measurements"
        output_stream: "LABEL:label"
        output_stream: "PROBABILITY:probability"
        node {{
          calculator: "iris_calculators:StandardizeCalculator"
          input_stream: "measurements"
          output_stream: "features"
        }}
        node {{
          calculator: "OpenVINOClassifier"
          input_stream: "FEATURES:features"
          output_stream: "SCORES:scores"
          node_options: {{
            [type.googleapis.com/mediapipe.OpenVINOModelServerSessionCalculatorOptions]: {{
              servable_name: "{options.servable_name}"
            }}
          }}
        }}
        node {{
          calculator: "iris_calculators:TopClassCalculator"
          input_stream: "scores"
          output_stream: "LABEL:label"
          output_stream: "PROBABILITY:probability"
        }}
    """
