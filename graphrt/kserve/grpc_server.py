"""KServe v2 over gRPC (`inference.GRPCInferenceService`, served on --port).

Each call translates its messages and hands them to the shared data plane; typed errors become
gRPC status codes (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE, ...) with the same message REST
gives. In ModelStreamInfer a refused request is answered with `error_message` and the stream
goes on; a graph failure is reported the same way and ends the stream. Inference calls get a
request id (the client's `x-request-id` metadata, or a new one) for their log lines and server
errors. It is returned in the trailing metadata of every error, and of successes when the client
sent one: setting trailing metadata costs grpc.aio 20-40 us of CPU per call, 4-8% of the calls
per second on a tiny model at 16 streams (benchmarks/kserve.py), which is too much to tell a
client an id it did not ask for and that only the server's logs know.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any, NoReturn

import grpc

from graphrt.error_map import to_client_error
from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc
from graphrt.kserve.dataplane import KServeDataPlane
from graphrt.kserve.types import (
    InferRequest,
    InferResponse,
    request_from_grpc,
    response_to_grpc,
)
from graphrt.observability import request_ids
from graphrt.serving.settings import GrpcSettings
from servables.errors import ServableError

logger = logging.getLogger(__name__)

INTERFACE = "gRPC"
STATUS_BY_HTTP = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    404: grpc.StatusCode.NOT_FOUND,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    499: grpc.StatusCode.CANCELLED,
    503: grpc.StatusCode.UNAVAILABLE,
}


def _incoming_id(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == request_ids.GRPC_METADATA_KEY and isinstance(value, str):
            return value
    return None


def _bind_id(context: Any) -> request_ids.BoundId:
    """Bind the call's request id; the client's own (if acceptable) comes back in the trailing
    metadata of a success too."""
    incoming = _incoming_id(context)
    request_id = request_ids.accept(incoming)
    if request_id == incoming:
        context.set_trailing_metadata(((request_ids.GRPC_METADATA_KEY, request_id),))
    return request_ids.bind(request_id)


def _id_metadata() -> tuple[tuple[str, str], ...]:
    current = request_ids.current()
    return ((request_ids.GRPC_METADATA_KEY, current),) if current else ()


def status_of(error: BaseException) -> tuple[grpc.StatusCode, str]:
    failure = to_client_error(error)
    return STATUS_BY_HTTP.get(failure.status, grpc.StatusCode.INTERNAL), failure.message


class InferenceServicer(pb_grpc.GRPCInferenceServiceServicer):
    """See the module docstring."""

    def __init__(self, dataplane: KServeDataPlane) -> None:
        self.dataplane = dataplane

    async def _abort(
        self, context: grpc.aio.ServicerContext[Any, Any], error: Exception
    ) -> NoReturn:
        code, message = status_of(error)
        await context.abort(code, message, trailing_metadata=_id_metadata())
        raise AssertionError("abort() returns only by raising")

    async def ServerLive(self, request: Any, context: Any) -> Any:
        return pb.ServerLiveResponse(live=self.dataplane.server_live())

    async def ServerReady(self, request: Any, context: Any) -> Any:
        return pb.ServerReadyResponse(ready=self.dataplane.server_ready())

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        found = self.dataplane.server_metadata()
        return pb.ServerMetadataResponse(
            name=found.name, version=found.version, extensions=found.extensions
        )

    async def ModelReady(self, request: Any, context: Any) -> Any:
        try:
            ready = self.dataplane.model_ready(request.name, request.version, INTERFACE)
        except Exception as error:
            await self._abort(context, error)
        return pb.ModelReadyResponse(ready=ready)

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        try:
            found = self.dataplane.model_metadata(request.name, request.version, INTERFACE)
        except Exception as error:
            await self._abort(context, error)
        tensor = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=found.name,
            versions=found.versions,
            platform=found.platform,
            inputs=[tensor(name=t.name, datatype=t.datatype, shape=t.shape) for t in found.inputs],
            outputs=[
                tensor(name=t.name, datatype=t.datatype, shape=t.shape) for t in found.outputs
            ],
        )

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        with _bind_id(context):
            try:
                response = await self.dataplane.infer(request_from_grpc(request), INTERFACE)
                return response_to_grpc(response)
            except Exception as error:
                await self._abort(context, error)

    async def ModelStreamInfer(
        self, request_iterator: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[Any]:
        async def requests() -> AsyncIterator[InferRequest | ServableError]:
            async for message in request_iterator:
                try:
                    yield request_from_grpc(message)
                except ServableError as error:  # answered in turn; the stream goes on
                    yield error

        with _bind_id(context):
            try:
                async for item in self.dataplane.stream(requests(), INTERFACE):
                    if isinstance(item, InferResponse):
                        yield pb.ModelStreamInferResponse(infer_response=response_to_grpc(item))
                    else:
                        yield pb.ModelStreamInferResponse(error_message=status_of(item)[1])
            except Exception as error:
                await self._abort(context, error)


async def start_grpc_server(
    dataplane: KServeDataPlane,
    address: str,
    port: int,
    max_message_bytes: int,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tuning: GrpcSettings | None = None,
) -> grpc.aio.Server:
    """The server on `address:port`; `tuning` is OVMS's --grpc_channel_arguments (which may
    override the message limits) and --grpc_max_threads (calls in progress at once)."""
    options: dict[str, int | str] = {
        "grpc.max_receive_message_length": max_message_bytes,
        "grpc.max_send_message_length": max_message_bytes,
    }
    tuning = tuning or GrpcSettings()
    options.update(tuning.channel_arguments)
    server = grpc.aio.server(
        options=list(options.items()),
        interceptors=list(interceptors) or None,
        maximum_concurrent_rpcs=tuning.max_concurrent_rpcs,
    )
    servicer = InferenceServicer(dataplane)
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    bound = server.add_insecure_port(f"{address}:{port}")
    if bound == 0:
        raise OSError(f"cannot listen for gRPC on {address}:{port}")
    await server.start()
    return server
