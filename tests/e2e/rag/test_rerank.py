"""/v3/rerank, /v1/rerank and Cohere's /v2/rerank end to end, on the committed tiny random BERT
cross-encoder (context 128 tokens), with plain HTTP as Cohere-style clients send it.

Expected scores come from running the same IR directly in this process: openvino-genai's
TextRerankPipeline for documents that fit the context, and for long documents the model itself
(openvino) on the (query, chunk) pairs built here the way a BERT pair is built, so the server's
chunking is checked against an independent computation.
"""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

RERANK_MODEL = "reranker"
QUERY = "what is the capital of france?"
DOCUMENTS = [
    "paris is the capital and largest city of france.",
    "the cat sits on the mat.",
    "berlin is the capital of germany.",
    "vector search finds documents close to the query.",
    "rome is the capital of italy.",
]
CONTEXT = 128


@pytest.fixture(scope="module")
def pipeline_scores(tiny_cross_encoder: Path) -> Any:
    """{document: score} from openvino-genai's TextRerankPipeline on the same IR."""
    genai: Any = importlib.import_module("openvino_genai")
    config = genai.TextRerankPipeline.Config()
    config.top_n = 100
    pipeline = genai.TextRerankPipeline(str(tiny_cross_encoder), "CPU", config)

    def scores(query: str, documents: list[str]) -> dict[int, float]:
        return {int(index): float(score) for index, score in pipeline.rerank(query, documents)}

    return scores


class DirectModel:
    """The cross-encoder run with openvino on pairs built here: [CLS] q [SEP] d [SEP]."""

    def __init__(self, path: Path) -> None:
        genai: Any = importlib.import_module("openvino_genai")
        ov: Any = importlib.import_module("openvino")
        self.tokenizer = genai.Tokenizer(str(path))
        self.model = ov.Core().compile_model(str(path / "openvino_model.xml"), "CPU")
        single = [int(t) for t in self.tokenizer.encode("x").input_ids.data[0]]
        self.cls, self.sep = single[0], single[-1]  # [CLS] x [SEP]

    def ids(self, text: str) -> list[int]:
        encoded = self.tokenizer.encode(text, add_special_tokens=False)
        return [int(t) for t in encoded.input_ids.data[0]]

    def score(self, query: list[int], document: list[int]) -> float:
        ids = [self.cls, *query, self.sep, *document, self.sep]
        types = [0] * (len(query) + 2) + [1] * (len(document) + 1)
        inputs = {
            "input_ids": np.array([ids], dtype=np.int64),
            "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
            "token_type_ids": np.array([types], dtype=np.int64),
        }
        logit = float(self.model(inputs)[0][0, 0])
        return 1.0 / (1.0 + np.exp(-logit))


@pytest.fixture(scope="module")
def direct(tiny_cross_encoder: Path) -> DirectModel:
    return DirectModel(tiny_cross_encoder)


def rerank(server: ExactServer, path: str = "/v3/rerank", **body: Any) -> httpx.Response:
    with server.http() as http:
        return http.post(path, json={"model": RERANK_MODEL, **body})


def test_scores_match_the_pipeline_and_are_sorted(
    rag_server: ExactServer, pipeline_scores: Any
) -> None:
    response = rerank(rag_server, query=QUERY, documents=DOCUMENTS)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    expected = pipeline_scores(QUERY, DOCUMENTS)
    assert sorted(r["index"] for r in results) == list(range(len(DOCUMENTS)))
    for result in results:
        assert result["relevance_score"] == pytest.approx(expected[result["index"]], abs=1e-5)
        assert 0.0 <= result["relevance_score"] <= 1.0
        assert "document" not in result
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert len(set(np.round(scores, 4))) > 1, "the fixture's scores should differ"


def test_top_n_return_documents_and_cohere_objects(rag_server: ExactServer) -> None:
    full = rerank(rag_server, query=QUERY, documents=DOCUMENTS).json()["results"]
    objects = [{"text": text, "title": f"doc {i}"} for i, text in enumerate(DOCUMENTS)]
    top = rerank(
        rag_server,
        path="/v1/rerank",
        query=QUERY,
        documents=objects,
        top_n=2,
        return_documents=True,
    )
    assert top.status_code == 200, top.text
    results = top.json()["results"]
    assert [r["index"] for r in results] == [r["index"] for r in full[:2]]
    for result in results:
        assert result["document"] == {"text": DOCUMENTS[result["index"]]}
    body = top.json()
    assert body["meta"]["api_version"]["version"] == "1"
    assert body["meta"]["tokens"]["input_tokens"] > 0
    assert isinstance(body["id"], str) and body["id"]


def test_cohere_v2_path(rag_server: ExactServer) -> None:
    response = rerank(rag_server, path="/v2/rerank", query=QUERY, documents=DOCUMENTS, top_n=3)
    assert response.status_code == 200, response.text
    body = response.json()
    assert len(body["results"]) == 3
    assert body["meta"]["api_version"]["version"] == "2"
    assert set(body["results"][0]) == {"index", "relevance_score"}


def test_long_documents_are_chunked_and_scored_by_their_best_chunk(
    rag_server: ExactServer, direct: DirectModel
) -> None:
    """A document of ~300 tokens does not fit the 128-token context: it is split into chunks of
    (context - query - 3 special tokens) tokens and scored by its best chunk."""
    long_document = " ".join(DOCUMENTS * 8)
    documents = [DOCUMENTS[1], long_document]
    response = rerank(rag_server, query=QUERY, documents=documents)
    assert response.status_code == 200, response.text
    scores = {r["index"]: r["relevance_score"] for r in response.json()["results"]}

    query = direct.ids(QUERY)
    size = CONTEXT - len(query) - 3
    ids = direct.ids(long_document)
    assert len(ids) > 2 * size
    chunks = [ids[start : start + size] for start in range(0, len(ids), size)]
    expected = max(direct.score(query, chunk) for chunk in chunks)
    assert scores[1] == pytest.approx(expected, abs=1e-5)
    assert scores[0] == pytest.approx(direct.score(query, direct.ids(DOCUMENTS[1])), abs=1e-5)

    only_first = rerank(rag_server, query=QUERY, documents=documents, max_chunks_per_doc=1)
    first = {r["index"]: r["relevance_score"] for r in only_first.json()["results"]}
    assert first[1] == pytest.approx(direct.score(query, chunks[0]), abs=1e-5)


def test_documents_that_tokenize_to_nothing_are_scored(
    rag_server: ExactServer, direct: DirectModel
) -> None:
    """Empty and control-character documents make no tokens; the tokenizer cannot batch a list
    of texts that are all empty, so the server must still score each as [CLS] q [SEP] [SEP]."""
    documents = ["", "\x05", ""]
    response = rerank(rag_server, query=QUERY, documents=documents)
    assert response.status_code == 200, response.text
    expected = direct.score(direct.ids(QUERY), [])
    scores = [r["relevance_score"] for r in response.json()["results"]]
    assert scores == pytest.approx([expected] * len(documents), abs=1e-5)


def test_long_query_keeps_half_the_context(rag_server: ExactServer, direct: DirectModel) -> None:
    long_query = " ".join([QUERY] * 30)
    response = rerank(rag_server, query=long_query, documents=[DOCUMENTS[0]])
    assert response.status_code == 200, response.text
    query = direct.ids(long_query)[: CONTEXT // 2]
    expected = direct.score(query, direct.ids(DOCUMENTS[0]))
    assert response.json()["results"][0]["relevance_score"] == pytest.approx(expected, abs=1e-5)


def test_concurrent_requests_get_their_own_scores(
    rag_server: ExactServer, pipeline_scores: Any
) -> None:
    async def send_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=rag_server.base_url, timeout=60) as http:
            return await asyncio.gather(
                *(
                    http.post(
                        "/v3/rerank",
                        json={"model": RERANK_MODEL, "query": QUERY, "documents": [document]},
                    )
                    for document in DOCUMENTS * 4
                )
            )

    expected = pipeline_scores(QUERY, DOCUMENTS)
    for i, response in enumerate(asyncio.run(send_all())):
        score = response.json()["results"][0]["relevance_score"]
        assert score == pytest.approx(expected[i % len(DOCUMENTS)], abs=1e-5)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ({"documents": ["a"]}, "query", "query is required"),
        ({"query": "  ", "documents": ["a"]}, "query", "must not be empty"),
        ({"query": 3, "documents": ["a"]}, "query", "query must be a string"),
        ({"query": "q"}, "documents", "documents is required"),
        ({"query": "q", "documents": []}, "documents", "must not be an empty array"),
        ({"query": "q", "documents": "a"}, "documents", "must be an array"),
        ({"query": "q", "documents": ["a", 1]}, "documents", "documents[1] must be a string"),
        ({"query": "q", "documents": [{"title": "t"}]}, "documents", '"text" field'),
        ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n", "positive integer"),
        ({"query": "q", "documents": ["a"], "return_documents": "yes"}, "return_documents", ""),
    ],
)
def test_bad_requests(
    rag_server: ExactServer, body: dict[str, Any], param: str, message: str
) -> None:
    openai_style = rerank(rag_server, **body)
    assert openai_style.status_code == 400, openai_style.text
    error = openai_style.json()["error"]
    assert error["param"] == param and message in error["message"]
    assert error["type"] == "invalid_request_error"
    cohere_style = rerank(rag_server, path="/v2/rerank", **body)
    assert cohere_style.status_code == 400, cohere_style.text
    assert cohere_style.json() == {"message": error["message"]}


def test_cohere_errors_for_unknown_models_and_bad_json(rag_server: ExactServer) -> None:
    with rag_server.http() as http:
        unknown = http.post("/v2/rerank", json={"model": "nope", "query": "q", "documents": ["a"]})
        broken = http.post(
            "/v2/rerank", content=b"{not json", headers={"Content-Type": "application/json"}
        )
    assert unknown.status_code == 404 and set(unknown.json()) == {"message"}
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["message"]


@pytest.fixture(scope="module")
def single_rerank_server(
    tiny_cross_encoder: Path, launch_exact: LaunchExact, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    """Single-model mode on a copy without graph.pbtxt: the task is inferred (rerank) and the
    graph generated from the flags."""
    import shutil

    model = tmp_path_factory.mktemp("single") / "cross-encoder"
    shutil.copytree(tiny_cross_encoder, model, ignore=shutil.ignore_patterns("graph.pbtxt"))
    args = ["--model_path", str(model), "--model_name", RERANK_MODEL, "--max_allowed_chunks", "4"]
    with launch_exact(args, model=RERANK_MODEL) as server:
        yield server


def test_single_model_mode_and_max_allowed_chunks(single_rerank_server: ExactServer) -> None:
    fits = rerank(single_rerank_server, query=QUERY, documents=DOCUMENTS[:4])
    assert fits.status_code == 200, fits.text
    too_many = rerank(single_rerank_server, query=QUERY, documents=DOCUMENTS)
    assert too_many.status_code == 400
    assert "at most 4 are allowed (max_allowed_chunks)" in too_many.json()["error"]["message"]
    long_document = " ".join(DOCUMENTS * 8)
    # Two documents, but each needs 3 chunks: 6 pairs.
    chunked = rerank(single_rerank_server, query=QUERY, documents=[long_document] * 2)
    assert chunked.status_code == 400
    assert "chunks" in chunked.json()["error"]["message"]
    assert "max_allowed_chunks" in chunked.json()["error"]["message"]


def test_tokenize_leaves_out_special_tokens_unless_asked(
    rag_server: ExactServer, direct: DirectModel
) -> None:
    with rag_server.http() as http:
        plain = http.post("/v3/tokenize", json={"model": RERANK_MODEL, "text": QUERY})
        special = http.post(
            "/v3/tokenize",
            json={"model": RERANK_MODEL, "text": [QUERY], "add_special_tokens": True},
        )
    assert plain.status_code == 200, plain.text
    assert plain.json() == {"tokens": direct.ids(QUERY)}
    assert special.json() == {"tokens": [[direct.cls, *direct.ids(QUERY), direct.sep]]}
