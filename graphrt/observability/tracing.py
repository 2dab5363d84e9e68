"""OpenTelemetry traces: a span per HTTP/gRPC request, its calculator calls and its generation.

    POST /v3/chat/completions                      (SERVER span; the client's traceparent honoured)
      ├─ LLMExecutor  (one span per Process() call on this request's packets)
      ├─ ...
      └─ llm.generate (TTFT event, tokens in/out)
           ├─ llm.queue    submitted → the engine step that produced the first token
           ├─ llm.prefill  that step
           └─ llm.decode   first token → last token

Calculator spans come from the graph run's observer (graphruntime.observe): each request runs its
own graph, so its run finds the request span as the current one. Engine spans are built when a
generation ends from the timings the servable keeps anyway (RequestStats, and the duration of the
engine step that produced the first token), so tracing adds no engine messages.

This module is imported only with --tracing: nothing else imports opentelemetry. Configuration is
the SDK's own, from the standard environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_BSP_*, ...), the
defaults being OTLP over HTTP/protobuf for traces and no metrics or logs exporter.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
from aiohttp import web
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.distro import OpenTelemetryConfigurator
from opentelemetry.environment_variables import (
    OTEL_LOGS_EXPORTER,
    OTEL_METRICS_EXPORTER,
    OTEL_TRACES_EXPORTER,
)
from opentelemetry.sdk.environment_variables import OTEL_EXPORTER_OTLP_PROTOCOL
from opentelemetry.trace import SpanKind, Status, StatusCode

from graphrt.observability import request_ids
from graphruntime.errors import GraphError
from graphruntime.packet import Packet
from graphruntime.validation import ValidatedGraph

if TYPE_CHECKING:
    from graphruntime.scheduler import GraphRun

# Probes and the observability routes themselves are not traced.
UNTRACED_PATHS = ("/graphs", "/metrics", "/v2/health", "/v1/config")
UNTRACED_RPCS = ("ServerLive", "ServerReady", "ModelReady")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def configure() -> trace.TracerProvider:
    """Set up the global tracer provider from OTEL_* as `opentelemetry-instrument` would."""
    os.environ.setdefault(OTEL_TRACES_EXPORTER, "otlp")
    os.environ.setdefault(OTEL_METRICS_EXPORTER, "none")
    os.environ.setdefault(OTEL_LOGS_EXPORTER, "none")
    os.environ.setdefault(OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf")
    OpenTelemetryConfigurator().configure()  # type: ignore[no-untyped-call]
    return trace.get_tracer_provider()


class Tracing:
    """Request, calculator and engine spans; see the module docstring."""

    def __init__(self, provider: trace.TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("graphrt")
        # perf_counter_ns (what graph runs report) to the epoch nanoseconds spans want.
        self.epoch_offset = time.time_ns() - time.perf_counter_ns()

    def epoch_ns(self, perf_counter_seconds: float) -> int:
        return int(perf_counter_seconds * 1e9) + self.epoch_offset

    # ---------------------------------------------------------------------- HTTP and gRPC

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "OPTIONS" or request.path.startswith(UNTRACED_PATHS):
            return await handler(request)
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else request.path
        attributes: dict[str, Any] = {
            "http.request.method": request.method,
            "url.path": request.path,
            "http.route": route,
        }
        request_id = request_ids.current()  # bound by the request-id middleware, outside this
        if request_id:
            attributes["graphrt.request_id"] = request_id
        with self.tracer.start_as_current_span(
            f"{request.method} {route}",
            context=propagate.extract(request.headers),
            kind=SpanKind.SERVER,
            attributes=attributes,
        ) as span:
            try:
                response = await handler(request)
            except web.HTTPException as error:
                span.set_attribute("http.response.status_code", error.status)
                raise
            span.set_attribute("http.response.status_code", response.status)
            if response.status >= 500:
                span.set_status(Status(StatusCode.ERROR))
            return response

    def grpc_interceptor(self) -> grpc.aio.ServerInterceptor:
        return _GrpcTracing(self)

    # ------------------------------------------------------------- graph runs (GraphObserver)

    def run_started(self, run: GraphRun) -> _RunSpans | None:
        span = trace.get_current_span()
        if not span.is_recording():
            return None  # a run outside a traced request (or sampled out)
        return _RunSpans(self, trace.set_span_in_context(span), run.graph)

    # ------------------------------------------------- generations (LLM request listener)

    def started(self, servable: Any, stats: Any) -> None:
        pass

    def finished(self, servable: Any, stats: Any) -> None:
        parent = trace.get_current_span()
        if not parent.is_recording():
            return
        context = trace.set_span_in_context(parent)
        end = stats.last_token or time.perf_counter()
        generation = self.tracer.start_span(
            "llm.generate",
            context=context,
            start_time=self.epoch_ns(stats.submitted),
            attributes={
                "gen_ai.system": "openvino",
                "gen_ai.request.model": servable.name,
                "gen_ai.usage.input_tokens": stats.prompt_tokens,
                "gen_ai.usage.output_tokens": stats.completion_tokens,
            },
        )
        inner = trace.set_span_in_context(generation)
        if stats.first_token is not None:
            ttft = stats.first_token - stats.submitted
            generation.add_event(
                "first_token",
                {"graphrt.ttft_seconds": ttft},
                timestamp=self.epoch_ns(stats.first_token),
            )
            generation.set_attribute("graphrt.ttft_seconds", ttft)
            prefill_start = max(stats.submitted, stats.first_token - stats.first_step_seconds)
            for name, start, stop in (
                ("llm.queue", stats.submitted, prefill_start),
                ("llm.prefill", prefill_start, stats.first_token),
                ("llm.decode", stats.first_token, end),
            ):
                span = self.tracer.start_span(name, context=inner, start_time=self.epoch_ns(start))
                span.end(end_time=self.epoch_ns(stop))
        generation.end(end_time=self.epoch_ns(end))

    def shutdown(self) -> None:
        """Export what is buffered (the provider's own shutdown flushes)."""
        shutdown = getattr(self.provider, "shutdown", None)
        if shutdown is not None:
            shutdown()


class _RunSpans:
    """One span per Process() call of one request's graph run."""

    __slots__ = ("context", "graph", "tracing")

    def __init__(self, tracing: Tracing, context: Context, graph: ValidatedGraph) -> None:
        self.tracing = tracing
        self.context = context
        self.graph = graph

    def process(
        self,
        node: int,
        timestamp: int,
        inputs: Sequence[Packet[Any]],
        start: int,
        end: int,
        error: BaseException | None,
    ) -> None:
        spec = self.graph.nodes[node]
        offset = self.tracing.epoch_offset
        names = spec.inputs.names
        # One string, not a list: list attributes cost more per span (measured), and this runs
        # per call.
        streams = ",".join(names[i] for i, packet in enumerate(inputs) if not packet.is_empty())
        span = self.tracing.tracer.start_span(
            spec.name,
            context=self.context,
            start_time=start + offset,
            attributes={
                "graphrt.calculator": spec.calculator_name,
                "graphrt.input_timestamp": timestamp,
                "graphrt.input_streams": streams,
            },
            record_exception=False,
            set_status_on_exception=False,
        )
        if error is not None and not isinstance(error, asyncio.CancelledError):
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end(end_time=end + offset)

    def lifecycle(
        self, node: int, phase: str, start: int, end: int, error: BaseException | None
    ) -> None:
        pass

    def packet(self, stream: str, packet: Packet[Any]) -> None:
        pass

    def finished(self, errors: Sequence[GraphError]) -> None:
        pass


class _GrpcTracing(grpc.aio.ServerInterceptor):
    """A SERVER span around each KServe gRPC call (the caller's traceparent metadata honoured)."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any] | None]
        ],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method.endswith(UNTRACED_RPCS):
            return handler
        metadata = dict(details.invocation_metadata)
        tracer = self.tracing.tracer
        name = method.lstrip("/")
        attributes = {"rpc.system": "grpc", "rpc.method": name}

        def span() -> Any:
            return tracer.start_as_current_span(
                name,
                context=propagate.extract(metadata),
                kind=SpanKind.SERVER,
                attributes=attributes,
            )

        if handler.unary_unary is not None:
            unary = handler.unary_unary

            async def traced_unary(request: Any, context: Any) -> Any:
                with span():
                    return await unary(request, context)

            return grpc.unary_unary_rpc_method_handler(
                traced_unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            streaming = handler.stream_stream

            async def traced_stream(requests: Any, context: Any) -> AsyncIterator[Any]:
                with span():
                    responses: Any = streaming(requests, context)
                    async for response in responses:
                        yield response

            return grpc.stream_stream_rpc_method_handler(
                traced_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler
