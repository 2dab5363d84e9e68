"""/v3/embeddings end to end: MiniLM exported by `graphrt export`, served next to an LLM and a
reranker, through the OpenAI SDK, LangChain and raw HTTP.

Expected vectors are sentence-transformers' own (computed in the export venv); expected token
counts come from the model's tokenizer run here with openvino-genai.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import numpy as np
import openai
import pytest

if TYPE_CHECKING:
    from conftest import ExactServer

SCHEMAS = Path(__file__).resolve().parents[2] / "fixtures" / "openai_schemas.json"
CONTEXT = 512  # MiniLM's max_position_embeddings
# The names rag_server's config.json gives its three models.
EMBEDDINGS_MODEL, RERANK_MODEL, LLM_MODEL = "minilm", "reranker", "smollm2"


def cosine(a: Any, b: Any) -> Any:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.fixture(scope="module")
def tokenizer(minilm_dir: Path) -> Any:
    genai: Any = importlib.import_module("openvino_genai")
    return genai.Tokenizer(str(minilm_dir))


def token_ids(tokenizer: Any, text: str) -> list[int]:
    return [int(t) for t in tokenizer.encode(text).input_ids.data[0]]


def schema_validator(name: str) -> jsonschema.protocols.Validator:
    document = json.loads(SCHEMAS.read_text(encoding="utf-8"))
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema)


def test_sdk_embeddings_match_sentence_transformers(
    rag_server: ExactServer, reference_embeddings: Any, tokenizer: Any, sentences: tuple[str, ...]
) -> None:
    with rag_server.client() as client:
        reply = client.embeddings.create(model=EMBEDDINGS_MODEL, input=list(sentences))
    vectors = np.array([item.embedding for item in reply.data])
    assert [item.index for item in reply.data] == list(range(len(sentences)))
    assert vectors.shape == (len(sentences), 384)
    similarity = cosine(vectors, reference_embeddings)
    assert similarity.min() >= 0.999, similarity
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected_tokens = sum(len(token_ids(tokenizer, text)) for text in sentences)
    assert reply.usage.prompt_tokens == expected_tokens
    assert reply.usage.total_tokens == expected_tokens
    assert reply.model == EMBEDDINGS_MODEL


def test_float_and_base64_are_the_same_vectors(
    rag_server: ExactServer, sentences: tuple[str, ...]
) -> None:
    body = {"model": EMBEDDINGS_MODEL, "input": list(sentences[:3])}
    with rag_server.http() as http:
        floats = http.post("/v3/embeddings", json={**body, "encoding_format": "float"})
        packed = http.post("/v1/embeddings", json={**body, "encoding_format": "base64"})
    assert floats.status_code == 200 and packed.status_code == 200, floats.text + packed.text
    schema_validator("CreateEmbeddingResponse").validate(floats.json())
    for as_float, as_base64 in zip(floats.json()["data"], packed.json()["data"], strict=True):
        decoded = np.frombuffer(base64.b64decode(as_base64["embedding"]), dtype="<f4")
        assert np.array_equal(decoded, np.array(as_float["embedding"], dtype=np.float32))


def test_token_ids_embed_like_their_text(
    rag_server: ExactServer, tokenizer: Any, sentences: tuple[str, ...]
) -> None:
    ids = [token_ids(tokenizer, text) for text in sentences[:3]]
    with rag_server.client() as client:
        by_text = client.embeddings.create(model=EMBEDDINGS_MODEL, input=list(sentences[:3]))
        by_ids = client.embeddings.create(model=EMBEDDINGS_MODEL, input=ids)
        one = client.embeddings.create(model=EMBEDDINGS_MODEL, input=ids[1])
        single_text = client.embeddings.create(model=EMBEDDINGS_MODEL, input=sentences[1])
    texts = np.array([item.embedding for item in by_text.data])
    assert np.allclose(np.array([item.embedding for item in by_ids.data]), texts, atol=1e-5)
    assert np.allclose(one.data[0].embedding, texts[1], atol=1e-5)
    assert np.allclose(single_text.data[0].embedding, texts[1], atol=1e-5)
    assert by_ids.usage.prompt_tokens == sum(len(i) for i in ids)


def test_dimensions_truncate_and_renormalise(
    rag_server: ExactServer, reference_embeddings: Any, sentences: tuple[str, ...]
) -> None:
    with rag_server.client() as client:
        reply = client.embeddings.create(
            model=EMBEDDINGS_MODEL, input=list(sentences[:2]), dimensions=64
        )
    vectors = np.array([item.embedding for item in reply.data])
    expected = reference_embeddings[:2, :64]
    expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
    assert vectors.shape == (2, 64)
    assert cosine(vectors, expected).min() >= 0.999
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_langchain_openai_embeddings(
    rag_server: ExactServer, reference_embeddings: Any, sentences: tuple[str, ...]
) -> None:
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=EMBEDDINGS_MODEL,
        base_url=rag_server.base_url + "/v3",
        api_key="unused",  # type: ignore[arg-type]
        check_embedding_ctx_length=False,
        max_retries=0,
    )
    documents = embeddings.embed_documents(list(sentences))
    query = embeddings.embed_query(sentences[3])
    assert cosine(np.array(documents), reference_embeddings).min() >= 0.999
    assert cosine(query, reference_embeddings[3]) >= 0.999


def test_concurrent_requests_are_batched_and_answered_alike(
    rag_server: ExactServer, reference_embeddings: Any, sentences: tuple[str, ...]
) -> None:
    """32 clients at once: every answer is its own sentence's embedding, and the server ran
    them in shared inferences (batches of more than one input)."""

    def batches(metrics: dict[str, float]) -> tuple[float, float]:
        return metrics["graphrt_encoder_batch_size_count"], metrics[
            "graphrt_encoder_batch_size_sum"
        ]

    before = batches(rag_server.metrics())

    async def send_all() -> list[Any]:
        async with rag_server.async_client() as client:
            return await asyncio.gather(
                *(
                    client.embeddings.create(
                        model=EMBEDDINGS_MODEL, input=sentences[i % len(sentences)]
                    )
                    for i in range(32)
                )
            )

    replies = asyncio.run(send_all())
    for i, reply in enumerate(replies):
        assert cosine(reply.data[0].embedding, reference_embeddings[i % len(sentences)]) >= 0.999
    after = batches(rag_server.metrics())
    inferences, inputs = after[0] - before[0], after[1] - before[1]
    assert inputs == 32
    assert inferences < 32, "concurrent requests were not batched together"


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"input": []}, "input", "must not be an empty array"),
        ({"input": 5.5}, "input", "input must be a string"),
        ({"input": [1, "a"]}, "input", "must not mix types"),
        ({"input": [[1, 2], []]}, "input", "input[1] must not be an empty array"),
        ({"input": [{"text": "x"}]}, "input", "input must be a string"),
        ({}, "input", "input is required"),
        ({"input": "x", "encoding_format": "int8"}, "encoding_format", "encoding_format"),
        ({"input": "x", "dimensions": 0}, "dimensions", "positive integer"),
        ({"input": "x", "dimensions": 385}, "dimensions", "at most 384"),
        ({"input": [[1, 2, 10**9]]}, "input", "outside the vocabulary"),
        ({"input": [[1, 2**70]]}, "input", "outside the vocabulary"),
        ({"input": "word " * (CONTEXT + 10)}, "input", "more than the model's context of 512"),
        ({"input": ["x"] * 2049}, "input", "at most 2048 are allowed per request"),
    ],
)
def test_bad_requests_are_openai_400s(
    rag_server: ExactServer, body: dict[str, Any], param: str, message: str
) -> None:
    with rag_server.http() as http:
        response = http.post("/v3/embeddings", json={"model": EMBEDDINGS_MODEL, **body})
    assert response.status_code == 400, response.text
    schema_validator("ErrorResponse").validate(response.json())
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert message in error["message"]


def test_sdk_raises_bad_request(rag_server: ExactServer) -> None:
    with rag_server.client() as client, pytest.raises(openai.BadRequestError) as raised:
        client.embeddings.create(model=EMBEDDINGS_MODEL, input=[])
    assert raised.value.status_code == 400


def test_wrong_endpoint_for_a_model_is_a_400(rag_server: ExactServer) -> None:
    with rag_server.http() as http:
        chat_on_embeddings = http.post(
            "/v3/chat/completions",
            json={"model": EMBEDDINGS_MODEL, "messages": [{"role": "user", "content": "hi"}]},
        )
        embeddings_on_llm = http.post("/v3/embeddings", json={"model": LLM_MODEL, "input": "hi"})
        unknown = http.post("/v3/embeddings", json={"model": "nope", "input": "hi"})
    assert chat_on_embeddings.status_code == 400, chat_on_embeddings.text
    assert (
        "it answers /v3/tokenize, /v3/embeddings" in chat_on_embeddings.json()["error"]["message"]
    )
    assert embeddings_on_llm.status_code == 400, embeddings_on_llm.text
    assert unknown.status_code == 404


def test_llm_serves_next_to_the_encoders(rag_server: ExactServer) -> None:
    with rag_server.client() as client:
        reply = client.chat.completions.create(
            model=LLM_MODEL,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=8,
            temperature=0,
        )
        models = {model.id for model in client.models.list()}
    assert reply.choices[0].message.content
    assert {LLM_MODEL, EMBEDDINGS_MODEL, RERANK_MODEL} <= models


def test_status_readiness_and_metrics_cover_the_encoders(rag_server: ExactServer) -> None:
    with rag_server.http() as http:
        config = http.get("/v1/config").json()
        for name in (EMBEDDINGS_MODEL, RERANK_MODEL):
            assert config[name]["model_version_status"][0]["state"] == "AVAILABLE"
            assert http.get(f"/v2/models/{name}/ready").status_code == 200
        http.post("/v3/embeddings", json={"model": EMBEDDINGS_MODEL, "input": "count me"})
    metrics = rag_server.metrics()
    assert metrics["graphrt_encoder_requests_total"] >= 1
    assert metrics["graphrt_encoder_tokens_total"] >= 1
    assert metrics["graphrt_encoder_request_seconds_count"] >= 1
    assert metrics["graphrt_encoder_inference_seconds_count"] >= 1
    # OVMS's counter; the parser may report it with a _total suffix.
    assert metrics.get("ovms_requests_success", metrics.get("ovms_requests_success_total", 0)) >= 1


def test_tokenize_counts_match_the_models_tokenizer(
    rag_server: ExactServer, tokenizer: Any
) -> None:
    texts = ["A cat sits outside.", "Vector search finds close documents."]
    with rag_server.http() as http:
        single = http.post("/v3/tokenize", json={"model": EMBEDDINGS_MODEL, "text": texts[0]})
        many = http.post("/v1/tokenize", json={"model": EMBEDDINGS_MODEL, "text": texts})
        cut = http.post(
            "/v3/tokenize",
            json={"model": EMBEDDINGS_MODEL, "text": texts[1], "max_length": 4},
        )
        bare = http.post(
            "/v3/tokenize",
            json={"model": EMBEDDINGS_MODEL, "text": texts[0], "add_special_tokens": False},
        )
        bad = http.post("/v3/tokenize", json={"model": EMBEDDINGS_MODEL, "text": [1]})
    assert single.status_code == 200, single.text
    assert single.json() == {"tokens": token_ids(tokenizer, texts[0])}  # [CLS] ... [SEP]
    assert many.json() == {"tokens": [token_ids(tokenizer, text) for text in texts]}
    truncated = tokenizer.encode(texts[1], max_length=4, truncation=True).input_ids.data[0]
    assert cut.json()["tokens"] == [int(t) for t in truncated]  # [CLS] a b [SEP]
    assert bare.json()["tokens"] == token_ids(tokenizer, texts[0])[1:-1]
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "text"


@pytest.mark.parametrize("model", [EMBEDDINGS_MODEL, RERANK_MODEL, LLM_MODEL])
def test_tokenize_limits_are_openai_400s(rag_server: ExactServer, model: str) -> None:
    """max_length is bounded by the model's context and padding by a total; a huge integer is
    a 400 naming the parameter, never a 500 or a giant allocation."""
    cases = [
        ({"max_length": 10**30}, "max_length"),
        ({"max_length": -3}, "max_length"),
        ({"max_length": 10**7, "pad_to_max_length": True}, "max_length"),
        ({"max_length": "12"}, "max_length"),
        ({"text": ["a"] * 20000, "max_length": 64, "pad_to_max_length": True}, "pad_to_max_length"),
    ]
    with rag_server.http() as http:
        for fields, param in cases:
            response = http.post("/v3/tokenize", json={"model": model, "text": "a b", **fields})
            assert response.status_code == 400, (fields, response.text)
            schema_validator("ErrorResponse").validate(response.json())
            assert response.json()["error"]["param"] == param
        padded = http.post(
            "/v3/tokenize",
            json={"model": model, "text": "a b", "max_length": 16, "pad_to_max_length": True},
        )
    assert padded.status_code == 200, padded.text
    assert len(padded.json()["tokens"]) == 16


def test_tokenize_max_length_is_bounded_by_the_context(rag_server: ExactServer) -> None:
    with rag_server.http() as http:
        at = http.post(
            "/v3/tokenize", json={"model": EMBEDDINGS_MODEL, "text": "a", "max_length": CONTEXT}
        )
        past = http.post(
            "/v3/tokenize",
            json={"model": EMBEDDINGS_MODEL, "text": "a", "max_length": CONTEXT + 1},
        )
    assert at.status_code == 200, at.text
    assert past.status_code == 400
    assert f"at most {CONTEXT}" in past.json()["error"]["message"]
