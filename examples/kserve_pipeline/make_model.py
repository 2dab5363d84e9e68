"""Write the example's model: a small flower classifier as OpenVINO IR (no download needed).

    python make_model.py [models_dir]      # default: ./models -> models/iris/1/model.xml

Four measurements (sepal length/width, petal length/width, standardized) in, three class scores
out: a linear layer with fixed weights, standing in for whatever model you export with OpenVINO.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops

# Rows: features; columns: setosa, versicolor, virginica.
WEIGHTS = np.array(
    [[-0.9, 0.4, 0.5], [1.2, -0.8, -0.4], [-2.1, 0.3, 1.8], [-2.0, 0.2, 1.9]], dtype=np.float32
)
BIAS = np.array([0.5, 0.8, -1.3], dtype=np.float32)


def build() -> ov.Model:
    features = ops.parameter([-1, 4], ov.Type.f32, name="features")
    features.output(0).get_tensor().set_names({"features"})
    scores = ops.add(ops.matmul(features, ops.constant(WEIGHTS), False, False), ops.constant(BIAS))
    scores.output(0).get_tensor().set_names({"scores"})
    return ov.Model([ops.result(scores)], [features], "iris")


def main() -> None:
    models = Path(sys.argv[1] if len(sys.argv) > 1 else "models")
    target = models / "iris" / "1" / "model.xml"
    target.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(build(), target, compress_to_fp16=False)
    print(target)


if __name__ == "__main__":
    main()
