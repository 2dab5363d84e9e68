"""KServe requests to DAG pipelines: checked against the pipeline's inputs, run as its graph.

As in OVMS, a request must give every pipeline input, each with the datatype and a shape its
metadata allows (the models it feeds; an input that only passes to the response takes
anything), and may ask for some outputs only. The inputs go to the graph streams the pipeline
was translated to (graphrt.serving.dag.graph), the graph runs once, and the response names the
pipeline, version 1, and the outputs by the pipeline's names. A model's own errors (a value it
refuses) come back naming the model's input; a demultiplexer's or gather's name the node.
"""

from __future__ import annotations

from typing import Any

from graphrt.kserve.graph_requests import run_once
from graphrt.kserve.types import InferRequest, InferResponse, tensor_from
from graphrt.serving.dag.servable import PIPELINE_VERSION, PipelineServable
from graphrt.serving.dag.signature import UNSPECIFIED
from servables.errors import InvalidRequest


def _packets(pipeline: PipelineServable, request: InferRequest) -> list[tuple[str, Any]]:
    assert pipeline.signature is not None
    signature, streams = pipeline.signature, pipeline.graph_streams.input_streams
    packets: list[tuple[str, Any]] = []
    given: set[str] = set()
    for tensor in request.inputs:
        spec = signature.input(tensor.name)
        if spec is None:
            takes = ", ".join(s.name for s in signature.inputs)
            raise InvalidRequest(
                f"Unexpected input: {tensor.name}; pipeline {pipeline.name} takes {takes}",
                param=tensor.name,
            )
        if tensor.name in given:
            raise InvalidRequest(f"Input {tensor.name} is given twice", param=tensor.name)
        given.add(tensor.name)
        if spec.datatype != UNSPECIFIED:
            if tensor.datatype != spec.datatype:
                raise InvalidRequest(
                    f"Invalid datatype of input {tensor.name}: got {tensor.datatype}, expected "
                    f"{spec.datatype}",
                    param=tensor.name,
                )
            if not spec.accepts_shape(tensor.data.shape):
                raise InvalidRequest(
                    f"Invalid shape of input {tensor.name}: got {list(tensor.data.shape)}, "
                    f"expected {list(spec.shape)}",
                    param=tensor.name,
                )
        if tensor.name in streams:
            packets.append((streams[tensor.name], tensor.data))
    missing = [spec.name for spec in signature.inputs if spec.name not in given]
    if missing:
        raise InvalidRequest(f"Missing input: {missing[0]}", param=missing[0])
    return packets


async def infer(pipeline: PipelineServable, request: InferRequest) -> InferResponse:
    """Run the pipeline once for a request (see the module docstring)."""
    pipeline.check_ready()
    streams = pipeline.graph_streams.output_streams
    packets = _packets(pipeline, request)
    wanted = list(request.outputs) or list(streams)
    for name in wanted:
        if name not in streams:
            raise InvalidRequest(
                f"Unexpected output: {name}; pipeline {pipeline.name} produces "
                + ", ".join(streams),
                param=name,
            )
    outputs = list(dict.fromkeys(streams[name] for name in wanted))
    results = dict(await run_once(pipeline, packets, outputs, pipeline.side_packets))
    return InferResponse(
        pipeline.name,
        str(PIPELINE_VERSION),
        request.id,
        [tensor_from(name, results[streams[name]].payload) for name in wanted],
    )
