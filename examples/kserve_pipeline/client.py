"""Classify flowers through the graph with Triton's KServe client (gRPC, or REST with --rest).

python client.py [--url 127.0.0.1:9000] [--rest] [--model iris_subgraphs]  5.1,3.5,1.4,0.2
"""

from __future__ import annotations

import argparse

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("flowers", nargs="+", help="sepal length,width,petal length,width (cm)")
    parser.add_argument("--url", default="127.0.0.1:9000", help="host:port of gRPC (or REST)")
    parser.add_argument("--rest", action="store_true", help="use KServe REST instead of gRPC")
    parser.add_argument("--model", default="iris_pipeline", help="graph to call (iris_subgraphs)")
    args = parser.parse_args()
    if args.rest:
        import tritonclient.http as kserve
    else:
        import tritonclient.grpc as kserve  # type: ignore[no-redef]

    measurements = np.array([[float(v) for v in f.split(",")] for f in args.flowers], np.float32)
    client = kserve.InferenceServerClient(args.url)
    request = kserve.InferInput("measurements", list(measurements.shape), "FP32")
    request.set_data_from_numpy(measurements)
    result = client.infer(args.model, [request])
    for label, probability in zip(
        result.as_numpy("label"), result.as_numpy("probability"), strict=True
    ):
        print(f"{label.decode()} {probability:.3f}")


if __name__ == "__main__":
    main()
