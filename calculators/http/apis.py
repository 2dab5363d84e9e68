"""Which API a request's path asks for: the one table of the HTTP paths graphs answer.

The application registers a route for every path here (each tail under each prefix) and calculators
dispatch on the same table, so a path means one thing everywhere. A tail is matched at the end of
the path, as OVMS's calculators match their endpoints (`/v3/chat/completions` is CHAT,
`/v3/completions` COMPLETIONS).
"""

from __future__ import annotations

import enum

from servables.errors import InvalidRequest, UnsupportedEndpoint

PREFIXES = ("/v3", "/v1", "/v3/v1")
COHERE_RERANK_PATH = "/v2/rerank"  # Cohere's own path, for Cohere's SDKs


class Api(enum.Enum):
    """An API graphs answer; the value is its path's tail."""

    CHAT = "/chat/completions"
    COMPLETIONS = "/completions"
    RESPONSES = "/responses"
    TOKENIZE = "/tokenize"
    EMBEDDINGS = "/embeddings"
    RERANK = "/rerank"
    IMAGE_GENERATIONS = "/images/generations"
    IMAGE_EDITS = "/images/edits"
    TRANSCRIPTIONS = "/audio/transcriptions"
    TRANSLATIONS = "/audio/translations"
    SPEECH = "/audio/speech"

    @property
    def takes_form(self) -> bool:
        """The request is a multipart form (an upload), not a JSON object."""
        return self in _FORM_APIS


_FORM_APIS = frozenset({Api.IMAGE_EDITS, Api.TRANSCRIPTIONS, Api.TRANSLATIONS})
# Longest tail first, so /chat/completions is not taken for /completions.
_BY_TAIL = sorted(Api, key=lambda api: -len(api.value))


def api_of(uri: str) -> Api | None:
    """The API whose tail ends the URI's path (its query and a trailing slash ignored)."""
    path = uri.split("?", 1)[0].rstrip("/")
    return next((api for api in _BY_TAIL if path.endswith(api.value)), None)


def served_paths() -> dict[str, Api]:
    """Every path the application routes to a graph, with its API."""
    paths = {prefix + api.value: api for prefix in PREFIXES for api in Api}
    paths[COHERE_RERANK_PATH] = Api.RERANK
    return paths


def endpoints_text(*apis: Api) -> str:
    """`/v3/a, /v3/b (also under /v1/)`: the paths of `apis`, for messages."""
    return ", ".join(f"/v3{api.value}" for api in apis) + " (also under /v1/)"


def expect_api(uri: str, node: str, *apis: Api) -> Api:
    """The API a request to `node` asks for, when it is one of `apis`. Otherwise the message names
    the path and what the node answers: a 400 for another API (the model cannot do that, as
    OVMS answers), a 404 for a path that is no API at all (a custom endpoint's path sent to a
    built-in node: for the client, an unknown URL)."""
    api = api_of(uri)
    if api not in apis:
        path = uri.split("?", 1)[0]
        message = f"{path} is not an endpoint of {node}: it answers {endpoints_text(*apis)}"
        raise (InvalidRequest if api is not None else UnsupportedEndpoint)(message)
    return api
