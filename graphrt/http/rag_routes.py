"""RAG routes: OpenAI embeddings and Cohere-style rerank, each run through the model's graph.

`POST /v3/embeddings` (and /v1/) takes OpenAI's embeddings request; `POST /v3/rerank` (and /v1/,
and Cohere's own path /v2/rerank) Cohere's rerank request. As for chat, the request's `model`
names the graph to run and its calculator answers with one JSON body. Errors are OpenAI's error
object, except on /v2/rerank, where clients are Cohere SDKs: there they are Cohere's
`{"message": ...}` with the same status codes.
"""

from __future__ import annotations

from aiohttp import web

from graphrt.http.openai_routes import (
    RequestConnection,
    http_payload,
    model_name,
    read_json,
    respond,
)
from graphrt.http.state import STATE

EMBEDDINGS_PATHS = ("/v3/embeddings", "/v1/embeddings", "/v3/v1/embeddings")
RERANK_PATHS = ("/v3/rerank", "/v1/rerank", "/v3/v1/rerank")
COHERE_RERANK_PATH = "/v2/rerank"


async def encode(request: web.Request) -> web.StreamResponse:
    """Run the named model's graph on the request; its one JSON body is the response."""
    state = request.app[STATE]
    raw, body = await read_json(request)
    servable = state.repository.get(model_name(body))
    connection = RequestConnection(request)
    payload = http_payload(request, raw, body, connection)
    with state.metrics.request(
        "V3", "REST", "Unary", servable.name, available=servable.available
    ) as record:
        return await respond(request, servable.run_http(payload), False, connection, record)


def is_rag_path(path: str) -> bool:
    """Paths clients must authenticate on (with --api_key_file) besides the OpenAI ones."""
    return path in EMBEDDINGS_PATHS or path in RERANK_PATHS or path == COHERE_RERANK_PATH


def is_cohere_path(path: str) -> bool:
    """Paths whose errors are Cohere-shaped."""
    return path == COHERE_RERANK_PATH


def add_routes(app: web.Application) -> None:
    for path in (*EMBEDDINGS_PATHS, *RERANK_PATHS, COHERE_RERANK_PATH):
        app.router.add_post(path, encode)
