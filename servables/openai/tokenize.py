"""OVMS's `/v3/tokenize` request and response (docs/model_server_rest_api_tokenizer.md).

`{"model", "text": str | [str], "max_length", "pad_to_max_length", "padding_side",
"add_special_tokens"}` → `{"tokens": [ids]}`, or a list of id lists when `text` is a list. Any
servable with a tokenizer can answer it (LLMs, VLMs, embedding models), so the parsing lives here,
apart from any servable; `encode` runs it on an openvino-genai Tokenizer.

`max_length` is bounded by the model's context (MAX_LENGTH when the servable knows none), and a
padded reply by MAX_PADDED_TOKENS ids in all, so a request cannot make the server build huge
arrays; tokenization runs on a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from servables.errors import InvalidRequest
from servables.io.request_fields import OVMS_LLM, RequestFields, model_of
from servables.io.text.tokenize import TokenizeRequest

__all__ = [
    "MAX_LENGTH",
    "MAX_PADDED_TOKENS",
    "parse_tokenize_request",
    "tokenize_body",
    "tokenize_reply",
]


MAX_LENGTH = 131072  # the bound on max_length for a servable that knows no context
MAX_PADDED_TOKENS = 1 << 20  # the texts times max_length of a padded request


def parse_tokenize_request(body: Any, context: int | None = None) -> TokenizeRequest:
    """The request, checked; `context` (the model's, if known) bounds max_length."""
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    fields = RequestFields(body, wording=OVMS_LLM)
    model = model_of(body)
    text = fields.raw("text")
    if isinstance(text, str):
        texts, batched = [text], False
    elif isinstance(text, list) and text and all(isinstance(item, str) for item in text):
        texts, batched = list(text), True
    else:
        raise InvalidRequest("text must be a string or a non-empty array of strings", param="text")
    max_length = fields.positive("max_length")
    limit = min(context, MAX_LENGTH) if context else MAX_LENGTH
    if max_length is not None and max_length > limit:
        raise InvalidRequest(
            f"max_length must be at most {limit}"
            + (" (the model's context)" if limit == context else ""),
            param="max_length",
        )
    pad = bool(fields.boolean("pad_to_max_length"))
    if pad and max_length is None:
        raise InvalidRequest("pad_to_max_length needs max_length", param="pad_to_max_length")
    if pad and max_length is not None and len(texts) * max_length > MAX_PADDED_TOKENS:
        raise InvalidRequest(
            f"padding {len(texts)} texts to {max_length} tokens makes more than "
            f"{MAX_PADDED_TOKENS} tokens; send fewer texts or a smaller max_length",
            param="pad_to_max_length",
        )
    side = fields.raw("padding_side")
    if side is not None and side not in ("left", "right"):
        raise InvalidRequest("padding_side must be 'left' or 'right'", param="padding_side")
    return TokenizeRequest(
        model=model,
        texts=texts,
        batched=batched,
        max_length=max_length,
        pad_to_max_length=pad,
        padding_side=side,
        add_special_tokens=fields.boolean("add_special_tokens"),
    )


def tokenize_body(request: TokenizeRequest, tokens: list[list[int]]) -> dict[str, Any]:
    return {"tokens": tokens if request.batched else tokens[0]}


async def tokenize_reply(
    tokenize: Callable[[TokenizeRequest], list[list[int]]], body: Any, context: int | None
) -> dict[str, Any]:
    """The whole /v3/tokenize exchange for a servable's `tokenize`: request body in, the JSON
    answer out.
    `context` is the model's (None: unknown); the tokenizer runs on a worker thread."""
    request = parse_tokenize_request(body, context)
    tokens = await asyncio.to_thread(tokenize, request)
    return tokenize_body(request, tokens)
