"""Request validation and response bodies of the embeddings (OpenAI) and rerank (Cohere) APIs."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest

from servables.embeddings.protocol import parse_embeddings_request, response_body, shorten
from servables.errors import InvalidRequest
from servables.rerank import protocol as rerank


def embeddings(body: dict[str, Any], max_inputs: int = 8) -> Any:
    return parse_embeddings_request({"model": "m", **body}, max_inputs)


@pytest.mark.parametrize(
    ("given", "texts", "ids"),
    [
        ("one", ["one"], None),
        (["a", "b"], ["a", "b"], None),
        ([1, 2, 3], None, [[1, 2, 3]]),
        ([[1], [2, 3]], None, [[1], [2, 3]]),
        ([""], [""], None),
    ],
)
def test_input_forms(given: Any, texts: Any, ids: Any) -> None:
    request = embeddings({"input": given})
    assert request.texts == texts and request.token_ids == ids
    assert request.encoding_format == "float" and request.dimensions is None


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({}, "input", "input is required"),
        ({"input": []}, "input", "must not be an empty array"),
        ({"input": ["a"] * 9}, "input", "input has 9 items; at most 8"),
        ({"input": [True]}, "input", "input must be a string"),
        ({"input": [[1, True]]}, "input", "input[0] must be an array of token ids"),
        ({"input": ["a", 1]}, "input", "must not mix types"),
        ({"input": {"a": 1}}, "input", "input must be a string"),
        ({"input": "a", "encoding_format": "hex"}, "encoding_format", "float"),
        ({"input": "a", "dimensions": True}, "dimensions", "positive integer"),
        ({"input": "a", "user": 5}, "user", "user must be a string"),
        ({"input": "a", "model": 5}, "model", "model must be a string"),
    ],
)
def test_embeddings_refusals(body: dict[str, Any], param: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        embeddings(body)
    assert raised.value.param == param
    assert message in raised.value.message


def test_unknown_fields_are_reported_not_refused() -> None:
    assert embeddings({"input": "a", "extra": 1}).ignored_fields == ["extra"]


def test_shorten_renormalises_only_normalised_embeddings() -> None:
    vectors = np.array([[3.0, 4.0, 12.0]], dtype=np.float32) / 13
    assert np.allclose(shorten(vectors, 2, True), [[0.6, 0.8]])
    assert np.allclose(shorten(vectors, 2, False), vectors[:, :2])
    assert shorten(vectors, None, True) is vectors
    with pytest.raises(InvalidRequest, match="at most 3"):
        shorten(vectors, 4, True)


def test_base64_is_little_endian_float32() -> None:
    vectors = np.array([[0.5, -1.25]], dtype=np.float32)
    body = response_body("m", vectors, 7, "base64")
    packed = body["data"][0]["embedding"]
    assert np.array_equal(np.frombuffer(base64.b64decode(packed), "<f4"), vectors[0])
    assert body["usage"] == {"prompt_tokens": 7, "total_tokens": 7}
    assert response_body("m", vectors, 7, "float")["data"][0]["embedding"] == [0.5, -1.25]


def test_rerank_request_forms() -> None:
    request = rerank.parse_rerank_request(
        {"model": "m", "query": "q", "documents": ["a", {"text": "b", "title": "t"}], "top_n": 9}
    )
    assert request.documents == ["a", "b"] and request.top_n == 2
    assert rerank.parse_rerank_request({"model": "m", "query": "q", "documents": ["a"]}).top_n == 1


def test_rerank_response_sorted_with_top_n_and_documents() -> None:
    request = rerank.parse_rerank_request(
        {
            "model": "m",
            "query": "q",
            "documents": ["a", "b", "c"],
            "top_n": 2,
            "return_documents": True,
        }
    )
    body = rerank.response_body(request, [0.1, 0.9, 0.5], 12, "2")
    assert [r["index"] for r in body["results"]] == [1, 2]
    assert body["results"][0] == {"index": 1, "relevance_score": 0.9, "document": {"text": "b"}}
    assert body["meta"]["api_version"] == {"version": "2"}
    assert body["meta"]["tokens"]["input_tokens"] == 12


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"documents": ["a"]}, "query"),
        ({"query": "", "documents": ["a"]}, "query"),
        ({"query": "q", "documents": []}, "documents"),
        ({"query": "q", "documents": [None]}, "documents"),
        ({"query": "q", "documents": ["a"], "top_n": -1}, "top_n"),
        ({"query": "q", "documents": ["a"], "max_chunks_per_doc": 0}, "max_chunks_per_doc"),
        ({"query": "q", "documents": ["a"], "rank_fields": ["title"]}, "rank_fields"),
    ],
)
def test_rerank_refusals(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        rerank.parse_rerank_request({"model": "m", **body})
    assert raised.value.param == param
