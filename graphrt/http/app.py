"""The aiohttp application: routes, error conversion, API keys and CORS.

Errors are converted here and only here. OpenAI routes answer OpenAI's error object
`{"error": {"message", "type", "param", "code"}}`; OVMS's system routes keep its
`{"error": "<message>"}` shape. A 503 for a temporary condition carries `Retry-After`.

Every request gets an id first (see graphrt.observability.request_ids), sent back in
`X-Request-Id` on every response, streams and errors included.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from calculators.http.apis import COHERE_RERANK_PATH, served_paths
from graphrt.error_map import to_client_error
from graphrt.errors import NotFound, Unauthorized
from graphrt.http import graph_page, graph_routes, model_routes, system_routes
from graphrt.http.state import STATE, ServerState
from graphrt.kserve import rest
from graphrt.kserve.dataplane import KServeDataPlane
from graphrt.observability import request_ids
from graphrt.observability.metrics import Metrics
from graphrt.serving.model_repository import ModelRepository
from graphrt.serving.settings import ServerSettings
from graphruntime.errors import GraphError
from servables.errors import ServableError
from servables.openai.bodies import error_body

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REQUEST_ID = "graphrt_request_id"  # key of the id in the aiohttp request's own mapping


API_PATHS = frozenset(served_paths())


def uses_openai_errors(path: str) -> bool:
    """Paths of OpenAI's (and Cohere's) APIs and custom endpoints (anything under /v3/ and /v1/
    but OVMS's /v1/config): their errors are OpenAI's error object, and they need the API key
    when one is set."""
    return path in API_PATHS or (
        path.startswith(("/v3/", "/v1/")) and not path.startswith("/v1/config")
    )


def error_response(request: web.Request, error: BaseException) -> web.Response:
    failure = to_client_error(error)
    if request.path == COHERE_RERANK_PATH:
        return web.json_response({"message": failure.message}, status=failure.status)
    if uses_openai_errors(request.path):
        body = error_body(failure.message, failure.error_type, failure.param, failure.code)
    else:
        body = {"error": failure.message}
    headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after else None
    return web.json_response(body, status=failure.status, headers=headers)


@web.middleware
async def request_id(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost: the id is bound before anything else runs, errors and their logs included."""
    given = request_ids.accept(request.headers.get(request_ids.HEADER))
    request[REQUEST_ID] = given
    with request_ids.bind(given):
        return await handler(request)


async def label_request_id(request: web.Request, response: web.StreamResponse) -> None:
    """Runs as headers go out (streams send theirs from inside the handler)."""
    given = request.get(REQUEST_ID)
    if isinstance(given, str):
        response.headers[request_ids.HEADER] = given


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except (ServableError, GraphError) as error:
        return error_response(request, error)
    except web.HTTPNotFound:
        return error_response(request, NotFound(f"Not found: {request.method} {request.path}"))
    except web.HTTPMethodNotAllowed:
        response = error_response(
            request, NotFound(f"Method {request.method} is not allowed on {request.path}")
        )
        response.set_status(405)
        return response
    except web.HTTPException:
        raise
    except Exception as error:  # a bug: log it once, answer without internals
        return error_response(request, error)


def auth_middleware(api_key: str) -> Middleware:
    expected = f"Bearer {api_key}".encode()

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if request.method != "OPTIONS" and uses_openai_errors(path):
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return error_response(
                    request, Unauthorized("Unauthorized request due to invalid or missing api-key")
                )
        return await handler(request)

    return authenticate


class Cors:
    """OVMS's CORS flags: answer preflights, and label every response a browser may read.

    Labels are added as a response is about to be sent (`on_response_prepare`), so streams,
    whose headers the handler sends itself, and error responses built by the error middleware
    get them too.
    """

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.allowed = [origin.strip() for origin in settings.allowed_origins.split(",")]

    def headers(self, request: web.Request) -> dict[str, str]:
        origin = request.headers.get("Origin")
        if origin is None or ("*" not in self.allowed and origin not in self.allowed):
            return {}
        settings = self.settings
        wildcard = "*" in self.allowed and not settings.allow_credentials
        result = {
            "Access-Control-Allow-Origin": "*" if wildcard else origin,
            "Access-Control-Allow-Methods": settings.allowed_methods,
            "Access-Control-Allow-Headers": settings.allowed_headers,
        }
        if settings.allow_credentials:
            result["Access-Control-Allow-Credentials"] = "true"
        if not wildcard:
            result["Vary"] = "Origin"
        return result

    @web.middleware
    async def preflight(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "OPTIONS" and "Origin" in request.headers:
            return web.Response(status=204)
        return await handler(request)

    async def label(self, request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(self.headers(request))


async def metrics_endpoint(request: web.Request) -> web.Response:
    body = request.app[STATE].metrics.render()
    return web.Response(
        body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
    )


def create_app(
    repository: ModelRepository,
    settings: ServerSettings,
    metrics: Metrics | None = None,
    dataplane: KServeDataPlane | None = None,
    tracing: Middleware | None = None,
) -> web.Application:
    """`tracing` (request spans, see graphrt.observability.tracing) wraps everything else."""
    cors = Cors(settings)
    # The request id is bound first, so the request's span (tracing) and every log line see it.
    middlewares: list[Middleware] = [
        request_id,
        *([tracing] if tracing else []),
        errors,
        cors.preflight,
    ]
    if settings.api_key:
        middlewares.append(auth_middleware(settings.api_key))
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_request_size)
    app.on_response_prepare.append(cors.label)
    app.on_response_prepare.append(label_request_id)
    if metrics is None:
        metrics = Metrics(settings.metrics_list)
    if dataplane is None:
        dataplane = KServeDataPlane(repository, metrics)
    app[STATE] = ServerState(repository, settings, time.time(), metrics, dataplane)
    graph_routes.add_routes(app)
    model_routes.add_routes(app)
    system_routes.add_routes(app)
    graph_page.add_routes(app)
    rest.add_routes(app)
    graph_routes.add_custom_routes(app)  # last: every route above takes precedence
    if settings.metrics_enable:
        app.router.add_get("/metrics", metrics_endpoint)
    return app
