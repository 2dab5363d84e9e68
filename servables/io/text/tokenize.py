"""Texts into token ids as `/tokenize` asks (truncated, padded, special tokens or not), with an
openvino-genai Tokenizer: what an LLM and an encoder servable do for the OpenAI-style request that
servables/openai/tokenize.py reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenizeRequest:
    model: str
    texts: list[str]
    batched: bool  # `text` was a list: answer a list of lists
    max_length: int | None = None  # truncate to this many tokens (and pad to it if asked)
    pad_to_max_length: bool = False
    padding_side: str | None = None  # "left" / "right"; None: the tokenizer's own
    add_special_tokens: bool | None = None  # None: the servable's default


def encode(
    tokenizer: Any, request: TokenizeRequest, *, special_tokens_by_default: bool = True
) -> list[list[int]]:
    """Token ids of each text with an openvino-genai Tokenizer, one text at a time (a batch
    would pad every text to the longest).

    Tokenizers converted from GGUF files carry no truncation or padding step, and openvino-genai
    then ignores `max_length` / `pad_to_max_length` silently; so both are (re)applied to the ids,
    which changes nothing where the tokenizer did it already.
    """
    results = []
    for text in request.texts:
        encoded = tokenizer.encode(
            text,
            add_special_tokens=special_tokens_by_default
            if request.add_special_tokens is None
            else request.add_special_tokens,
            pad_to_max_length=request.pad_to_max_length,
            max_length=request.max_length,
            padding_side=request.padding_side,
            truncation=request.max_length is not None,
        )
        ids = [int(token) for token in encoded.input_ids.data[0]]
        limit = request.max_length
        if limit is not None and len(ids) > limit:
            ids = ids[:limit]
        if request.pad_to_max_length and limit is not None and len(ids) < limit:
            padding = [int(tokenizer.get_pad_token_id())] * (limit - len(ids))
            ids = padding + ids if request.padding_side == "left" else ids + padding
        results.append(ids)
    return results
