"""TokenizerBatcher: the tokenizer calls of one event-loop turn go in one call per flag; and
`encode_many`, the encode side, gives every text the ids it gets alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from servables.llm.detokenizer import IncrementalDetokenizer
from servables.llm.engine_requests import BATCH_TEXT_CHARACTERS, encode_many
from servables.llm.tokenizer_batcher import TokenizerBatcher

PIECES = {1: "Hel", 2: "lo", 3: " wor", 4: "ld", 5: "!"}


def join(ids: list[int]) -> str:
    return "".join(PIECES[i] for i in ids)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, bool]] = []

    def __call__(self, windows: list[list[int]], skip: bool) -> list[str]:
        self.calls.append((len(windows), skip))
        return [join(window) for window in windows]


async def test_requests_of_one_loop_turn_share_one_call() -> None:
    recorder = Recorder()
    batcher = TokenizerBatcher(recorder)
    detokenizers = [IncrementalDetokenizer(join) for _ in range(32)]

    async def step(detokenizer: IncrementalDetokenizer, ids: list[int]) -> str:
        return detokenizer.deliver(await batcher.run(detokenizer.windows(ids), True))

    first = await asyncio.gather(*(step(d, [1, 2]) for d in detokenizers))
    second = await asyncio.gather(*(step(d, [3]) for d in detokenizers))
    assert first == ["Hello"] * 32 and second == [" wor"] * 32
    assert recorder.calls == [(32, True), (32, True)]


async def test_flags_are_decoded_separately_and_order_is_kept() -> None:
    recorder = Recorder()
    batcher = TokenizerBatcher(recorder)
    results = await asyncio.gather(
        batcher.run([[1], [2, 3]], True),
        batcher.run([[4]], False),
        batcher.run([[5], [1, 2]], True),
    )
    assert results == [["Hel", "lo wor"], ["ld"], ["!", "Hello"]]
    assert sorted(recorder.calls) == [(1, False), (4, True)]


async def test_empty_windows_need_no_call() -> None:
    recorder = Recorder()
    assert await TokenizerBatcher(recorder).run([], True) == []
    assert recorder.calls == []


async def test_a_failing_call_fails_only_the_callers_whose_items_fail() -> None:
    calls: list[list[list[int]]] = []

    def decode_many(windows: list[list[int]], skip: bool) -> list[str]:
        calls.append(windows)
        if [9] in windows:
            raise RuntimeError("tokenizer broke")
        return [join(window) for window in windows]

    batcher = TokenizerBatcher(decode_many)
    results: list[Any] = await asyncio.gather(
        batcher.run([[1]], True),
        batcher.run([[9]], True),
        batcher.run([[2], [3]], True),
        batcher.run([[4]], False),
        return_exceptions=True,
    )
    assert results[0] == ["Hel"] and results[2] == ["lo", " wor"] and results[3] == ["ld"]
    assert isinstance(results[1], RuntimeError)
    # The shared call failed; then each of its callers ran alone. The other flag was not touched.
    assert calls == [[[1], [9], [2], [3]], [[1]], [[9]], [[2], [3]], [[4]]]


def test_two_phase_api_matches_add() -> None:
    stream = [[1], [2, 3], [4], [5]]
    plain = IncrementalDetokenizer(join, stop=["ld!"])
    split = IncrementalDetokenizer(join, stop=["ld!"])
    expected = [plain.add(ids) for ids in stream] + [plain.finish()]
    got = [split.deliver([join(w) for w in split.windows(ids)]) for ids in stream]
    got.append(split.finish())
    assert got == expected
    assert split.text == plain.text == "Hello wor" and split.stopped


TEXTS = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "",
    "hi",
    "é漢字🙂 and a tab\t, trailing spaces   ",
    "Plain prose. " * 40,
    "x" * (BATCH_TEXT_CHARACTERS + 1),  # tokenized on its own
    "<|endoftext|> special tokens written in the text <|im_end|>",
]


@pytest.mark.parametrize("add_special_tokens", [False, True])
def test_texts_encoded_together_get_their_own_ids(
    smollm2_tokenizer: Any, add_special_tokens: bool
) -> None:
    alone = [
        smollm2_tokenizer.encode(text, add_special_tokens=add_special_tokens)
        .input_ids.data[0]
        .tolist()
        for text in TEXTS
    ]
    together = encode_many(smollm2_tokenizer, TEXTS, add_special_tokens)
    assert together == alone
    assert all(type(token) is int for ids in together for token in ids)


async def test_concurrent_encodes_share_one_tokenizer_call(smollm2_tokenizer: Any) -> None:
    calls: list[int] = []

    def run_many(texts: list[str], add_special_tokens: bool) -> list[list[int]]:
        calls.append(len(texts))
        return encode_many(smollm2_tokenizer, texts, add_special_tokens)

    batcher: TokenizerBatcher[str, list[int]] = TokenizerBatcher(run_many)
    results = await asyncio.gather(*(batcher.run([text], False) for text in TEXTS[:5]))
    assert calls == [5]
    assert [ids for (ids,) in results] == encode_many(smollm2_tokenizer, TEXTS[:5], False)
