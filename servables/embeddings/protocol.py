"""OpenAI's embeddings API: request validation and the response body.

`input` is a string, a list of strings, a list of token ids or a list of token-id lists; anything
else is refused with a 400 naming the field, never a 500. `encoding_format` "base64" packs each
vector as little-endian float32 bytes (what the OpenAI SDK asks for by default and decodes).
`dimensions` keeps the first N components and L2-normalises them again, as Matryoshka models
are meant to be used; more than the model has is a 400.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from servables.errors import InvalidRequest
from servables.io.request_fields import PLAIN, RequestFields, is_integer

EncodingFormat = Literal["float", "base64"]


@dataclass(frozen=True)
class EmbeddingsRequest:
    model: str
    texts: list[str] | None  # exactly one of texts / token_ids is set
    token_ids: list[list[int]] | None
    encoding_format: EncodingFormat = "float"
    dimensions: int | None = None
    ignored_fields: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.texts if self.texts is not None else self.token_ids or [])


INPUT_TYPES = (
    "input must be a string, an array of strings, an array of token ids (integers) or an array "
    "of arrays of token ids"
)


def _parse_input(value: Any, max_inputs: int) -> tuple[list[str] | None, list[list[int]] | None]:
    if value is None:
        raise InvalidRequest("input is required", param="input")
    if isinstance(value, str):
        return [value], None
    if not isinstance(value, list):
        raise InvalidRequest(INPUT_TYPES, param="input")
    if not value:
        raise InvalidRequest("input must not be an empty array", param="input")
    if len(value) > max_inputs:
        raise InvalidRequest(
            f"input has {len(value)} items; at most {max_inputs} are allowed per request",
            param="input",
        )
    if all(isinstance(item, str) for item in value):
        return list(value), None
    if all(is_integer(item) for item in value):
        return None, [list(value)]
    if all(isinstance(item, list) for item in value):
        for index, item in enumerate(value):
            if not item:
                raise InvalidRequest(f"input[{index}] must not be an empty array", param="input")
            if not all(is_integer(token) for token in item):
                raise InvalidRequest(
                    f"input[{index}] must be an array of token ids (integers)", param="input"
                )
        return None, [list(item) for item in value]
    kinds = {type(item).__name__ for item in value}
    if len(kinds) > 1:
        raise InvalidRequest(
            "input must not mix types: every item must be a string, or every item a token id, "
            "or every item an array of token ids",
            param="input",
        )
    raise InvalidRequest(INPUT_TYPES, param="input")


def parse_embeddings_request(body: Any, max_inputs: int) -> EmbeddingsRequest:
    """Validate an OpenAI embeddings request body; raises InvalidRequest naming the field."""
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    fields = RequestFields(body, wording=PLAIN)
    model = fields.raw("model")
    if not isinstance(model, str):
        raise InvalidRequest("model must be a string", param="model")
    texts, token_ids = _parse_input(fields.raw("input"), max_inputs)
    given = fields.raw("encoding_format")
    if given not in (None, "float", "base64"):
        raise InvalidRequest('encoding_format must be "float" or "base64"', param="encoding_format")
    encoding: EncodingFormat = "base64" if given == "base64" else "float"
    dimensions = fields.positive("dimensions")
    fields.string("user")
    return EmbeddingsRequest(
        model=model,
        texts=texts,
        token_ids=token_ids,
        encoding_format=encoding,
        dimensions=dimensions,
        ignored_fields=fields.unused(),
    )


def shorten(
    vectors: npt.NDArray[np.float32], dimensions: int | None, normalize: bool
) -> npt.NDArray[np.float32]:
    """Keep the first `dimensions` components, L2-normalised again when embeddings are."""
    size = vectors.shape[1]
    if dimensions is None or dimensions == size:
        return vectors
    if dimensions > size:
        raise InvalidRequest(
            f"dimensions must be at most {size}: this model's embeddings have {size} dimensions",
            param="dimensions",
        )
    kept = vectors[:, :dimensions]
    if normalize:
        norms = np.linalg.norm(kept, axis=1, keepdims=True)
        kept = kept / np.maximum(norms, 1e-12)
    return np.ascontiguousarray(kept, dtype=np.float32)


def response_body(
    model: str,
    vectors: npt.NDArray[np.float32],
    prompt_tokens: int,
    encoding_format: EncodingFormat,
) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    for index, vector in enumerate(vectors):
        embedding: Sequence[float] | str
        if encoding_format == "base64":
            embedding = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
        else:
            embedding = vector.tolist()
        data.append({"object": "embedding", "embedding": embedding, "index": index})
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }
