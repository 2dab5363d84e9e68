"""Cohere's rerank API (v1 and v2 request shapes, as OVMS serves it): validation and response.

`documents` are strings or Cohere v1's objects with a `text` field; `top_n` keeps the best N;
`return_documents` (v1) adds each document's text to its result. Cohere's per-document limits
are honoured: `max_chunks_per_doc` (v1) and `max_tokens_per_doc` (v2). Results are sorted by
`relevance_score` (0..1), best first; ties keep the documents' order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from servables.errors import InvalidRequest
from servables.io.request_fields import PLAIN, RequestFields


@dataclass(frozen=True)
class RerankRequest:
    model: str
    query: str
    documents: list[str]
    top_n: int
    return_documents: bool = False
    max_chunks_per_doc: int | None = None
    max_tokens_per_doc: int | None = None
    ignored_fields: list[str] = field(default_factory=list)


def _document_text(index: int, document: Any) -> str:
    if isinstance(document, str):
        return document
    if isinstance(document, dict):
        text = document.get("text")
        if not isinstance(text, str):
            raise InvalidRequest(
                f'documents[{index}] must have a string "text" field', param="documents"
            )
        return text
    raise InvalidRequest(
        f'documents[{index}] must be a string or an object with a "text" field', param="documents"
    )


def parse_rerank_request(body: Any) -> RerankRequest:
    """Validate a rerank request body; raises InvalidRequest naming the field."""
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    fields = RequestFields(body, wording=PLAIN)
    model = fields.raw("model")
    if not isinstance(model, str):
        raise InvalidRequest("model must be a string", param="model")
    query = fields.string("query", required=True) or ""
    if not query.strip():
        raise InvalidRequest("query must not be empty or only whitespace", param="query")
    documents = fields.raw("documents")
    if documents is None:
        raise InvalidRequest("documents is required", param="documents")
    if not isinstance(documents, list):
        raise InvalidRequest("documents must be an array", param="documents")
    if not documents:
        raise InvalidRequest("documents must not be an empty array", param="documents")
    texts = [_document_text(index, document) for index, document in enumerate(documents)]
    rank_fields = fields.raw("rank_fields")
    if rank_fields is not None and rank_fields != ["text"]:
        raise InvalidRequest('rank_fields: only ["text"] is supported', param="rank_fields")
    top_n = fields.positive("top_n")
    return RerankRequest(
        model=model,
        query=query,
        documents=texts,
        top_n=min(top_n or len(texts), len(texts)),
        return_documents=bool(fields.boolean("return_documents")),
        max_chunks_per_doc=fields.positive("max_chunks_per_doc"),
        max_tokens_per_doc=fields.positive("max_tokens_per_doc"),
        ignored_fields=fields.unused(),
    )


def response_body(
    request: RerankRequest, scores: list[float], input_tokens: int, api_version: str
) -> dict[str, Any]:
    order = sorted(range(len(scores)), key=lambda index: -scores[index])[: request.top_n]
    results: list[dict[str, Any]] = []
    for index in order:
        result: dict[str, Any] = {"index": index, "relevance_score": scores[index]}
        if request.return_documents:
            result["document"] = {"text": request.documents[index]}
        results.append(result)
    return {
        "id": str(uuid.uuid4()),
        "results": results,
        "meta": {
            "api_version": {"version": api_version},
            "billed_units": {"search_units": 1},
            "tokens": {"input_tokens": input_tokens, "output_tokens": 0},
        },
    }
