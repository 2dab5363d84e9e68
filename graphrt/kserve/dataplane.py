"""The KServe v2 protocol, once, for both transports: health, metadata and inference.

A name is a plain OpenVINO model (model_config_list, with versions), a DAG pipeline
(pipeline_config_list: version 1, and as in OVMS the version a request names is ignored) or a
graph (mediapipe_config_list, always version 1). Models and pipelines are counted in OVMS's
per-version metrics (model_metrics.py: ModelInfer, ModelMetadata and ModelReady calls), graphs
in the graph metrics. REST and gRPC only translate their wire forms to
`InferRequest`/`InferResponse` and map the typed errors raised here to their status codes
(unknown model or version: ModelNotFound; bad tensors: InvalidRequest; not loaded:
ServableNotReady), so both answer the same request the same way.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import metadata

from graphrt.kserve import graph_requests, pipeline_requests
from graphrt.kserve.types import InferRequest, InferResponse, tensor_from
from graphrt.observability.metrics import Metrics
from graphrt.observability.model_metrics import INFER, METADATA, READY
from graphrt.serving.dag.servable import PIPELINE_VERSION, PipelineServable
from graphrt.serving.graph_servable import GraphServable
from graphrt.serving.model_repository import ModelRepository
from graphruntime.errors import GraphError
from servables.errors import InvalidRequest, ModelNotFound, ServableError
from servables.ov_model.model import OpenVINOModel, TensorSpec
from servables.ov_model.versions import VersionedModel

logger = logging.getLogger(__name__)

API = "KServe"
# Graph streams have no fixed type or shape; OVMS reports them this way.
GRAPH_TENSOR_DATATYPE = "INVALID"


def server_version() -> str:
    try:
        return metadata.version("graphrt")
    except metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class ServerMetadata:
    name: str
    version: str
    extensions: list[str]


@dataclass(frozen=True)
class ModelMetadata:
    name: str
    versions: list[str]
    platform: str
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)


def parse_version(text: str) -> int | None:
    """'' -> None (the latest); otherwise a positive integer."""
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise InvalidRequest(f"Model version must be a positive integer, got {text!r}")
    return int(text)


class KServeDataPlane:
    """See the module docstring."""

    def __init__(self, repository: ModelRepository, metrics: Metrics) -> None:
        self.repository = repository
        self.metrics = metrics
        self.shutting_down = False

    # ------------------------------------------------------------------------------ health

    def server_live(self) -> bool:
        return True

    def server_ready(self) -> bool:
        return not self.shutting_down and self.repository.ready

    def server_metadata(self) -> ServerMetadata:
        return ServerMetadata("graphrt", server_version(), ["binary_data"])

    def _find(self, name: str, version: str) -> GraphServable | VersionedModel:
        number = parse_version(version)
        model = self.repository.models.get(name)
        if model is not None:
            if number is not None and number not in model.versions:
                raise ModelNotFound(f"Model with requested version is not found: {name} {number}")
            return model
        graph = self.repository.servables.get(name)
        if graph is None:
            raise ModelNotFound(f"Model with requested name is not found: {name}")
        if number not in (None, graph.definition.version) and not isinstance(
            graph, PipelineServable
        ):
            raise ModelNotFound(f"Model with requested version is not found: {name} {number}")
        return graph

    def model_ready(self, name: str, version: str, interface: str) -> bool:
        target = self._find(name, version)
        if isinstance(target, GraphServable):
            if isinstance(target, PipelineServable):
                self.metrics.models.counted((interface, READY, name, ""), succeeded=True)
            return target.available
        number = parse_version(version)
        available = target.available_versions()
        self.metrics.models.counted((interface, READY, name, ""), succeeded=True)
        return number in available if number is not None else bool(available)

    def model_metadata(self, name: str, version: str, interface: str) -> ModelMetadata:
        target = self._find(name, version)
        if isinstance(target, PipelineServable):
            with self.metrics.models.request(
                interface, METADATA, name, str(PIPELINE_VERSION)
            ) as record:
                target.check_ready()
                assert target.signature is not None
                record.succeeded = True
                return ModelMetadata(
                    name,
                    [str(PIPELINE_VERSION)],
                    "OpenVINO",
                    list(target.signature.inputs),
                    list(target.signature.outputs),
                )
        if isinstance(target, GraphServable):
            number = str(target.definition.version)
            ports = graph_requests.ports_of(target)
            return ModelMetadata(
                name,
                [number],
                "OpenVINO",
                [TensorSpec(n, GRAPH_TENSOR_DATATYPE, ()) for n in ports.inputs],
                [TensorSpec(n, GRAPH_TENSOR_DATATYPE, ()) for n in ports.outputs],
            )
        model = target.get(parse_version(version))
        with self.metrics.models.request(interface, METADATA, name, str(model.version)) as record:
            record.succeeded = True
            return ModelMetadata(
                name,
                [str(n) for n in target.available_versions()],
                "OpenVINO",
                list(model.inputs),
                list(model.outputs),
            )

    # ---------------------------------------------------------------------------- inference

    async def infer(self, request: InferRequest, interface: str) -> InferResponse:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "KServe %s ModelInfer %s version %r id %r: inputs %s",
                interface,
                request.model,
                request.version,
                request.id,
                ", ".join(f"{t.name} {t.datatype}{t.shape}" for t in request.inputs),
            )
        target = self._find(request.model, request.version)
        if isinstance(target, VersionedModel):
            model = target.get(parse_version(request.version))
            with self.metrics.models.request(
                interface, INFER, request.model, str(model.version)
            ) as counted:
                response = await infer_model(model, request)
                counted.succeeded = True
                return response
        if isinstance(target, PipelineServable):
            with self.metrics.models.request(
                interface, INFER, request.model, str(PIPELINE_VERSION)
            ) as counted:
                response = await pipeline_requests.infer(target, request)
                counted.succeeded = True
                return response
        with self.metrics.request(
            API, interface, INFER, request.model, available=target.available
        ) as record:
            try:
                response = await graph_requests.infer(target, request)
            except (ServableError, GraphError):
                record.graph_failed()
                raise
            record.responded()
            record.succeeded = True
            return response

    async def _each(
        self,
        first: InferRequest,
        requests: AsyncIterator[InferRequest | ServableError],
        interface: str,
    ) -> AsyncIterator[InferResponse | ServableError]:
        """A stream of requests to a model or pipeline: each answered (and counted) on its own,
        errors included."""
        request: InferRequest | ServableError | None = first
        while request is not None:
            try:
                if isinstance(request, ServableError):
                    raise request
                if request.model != first.model:
                    raise InvalidRequest(
                        f"Every request of a stream must name the model of the first "
                        f"({first.model})"
                    )
                yield await self.infer(request, interface)
            except ServableError as error:
                yield error
            request = await anext(requests, None)

    async def stream(
        self, requests: AsyncIterator[InferRequest | ServableError], interface: str
    ) -> AsyncIterator[InferResponse | ServableError | GraphError]:
        """Responses (and per-request errors) for one ModelStreamInfer call.

        `requests` yields a ServableError for a message the transport could not decode; it is
        answered in turn like any refused request.
        """
        first = await anext(requests, None)
        while isinstance(first, ServableError):
            yield first
            first = await anext(requests, None)
        if first is None:
            return
        logger.debug(
            "KServe %s ModelStreamInfer %s version %r", interface, first.model, first.version
        )
        target = self._find(first.model, first.version)
        if not isinstance(target, GraphServable) or isinstance(target, PipelineServable):
            async for answer in self._each(first, requests, interface):
                yield answer
            return
        with self.metrics.request(
            API, interface, "ModelStreamInfer", first.model, available=target.available
        ) as record:
            stream = graph_requests.GraphStream(target, first)
            items = stream.responses(requests)
            failed = False
            async for item in items:
                if isinstance(item, InferResponse):
                    record.responded()
                else:
                    failed = True
                    record.graph_failed()
                yield item
            record.succeeded = not failed


async def infer_model(model: OpenVINOModel, request: InferRequest) -> InferResponse:
    inputs = {}
    for tensor in request.inputs:
        if tensor.name in inputs:
            raise InvalidRequest(f"Input {tensor.name} is given twice", param=tensor.name)
        inputs[tensor.name] = tensor.data
    results = await model.infer(inputs, request.outputs or None)
    return InferResponse(
        model.name,
        str(model.version),
        request.id,
        [tensor_from(name, value) for name, value in results.items()],
    )
