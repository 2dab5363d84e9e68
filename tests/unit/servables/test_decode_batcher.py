"""DecodeBatcher: the windows of every request woken by one engine step go in one decode call."""

from __future__ import annotations

import asyncio
from typing import Any

from servables.llm.decode_batcher import DecodeBatcher
from servables.llm.detokenizer import IncrementalDetokenizer

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
    batcher = DecodeBatcher(recorder)
    detokenizers = [IncrementalDetokenizer(join) for _ in range(32)]

    async def step(detokenizer: IncrementalDetokenizer, ids: list[int]) -> str:
        return detokenizer.deliver(await batcher.decode(detokenizer.windows(ids), True))

    first = await asyncio.gather(*(step(d, [1, 2]) for d in detokenizers))
    second = await asyncio.gather(*(step(d, [3]) for d in detokenizers))
    assert first == ["Hello"] * 32 and second == [" wor"] * 32
    assert recorder.calls == [(32, True), (32, True)]


async def test_flags_are_decoded_separately_and_order_is_kept() -> None:
    recorder = Recorder()
    batcher = DecodeBatcher(recorder)
    results = await asyncio.gather(
        batcher.decode([[1], [2, 3]], True),
        batcher.decode([[4]], False),
        batcher.decode([[5], [1, 2]], True),
    )
    assert results == [["Hel", "lo wor"], ["ld"], ["!", "Hello"]]
    assert sorted(recorder.calls) == [(1, False), (4, True)]


async def test_empty_windows_need_no_call() -> None:
    recorder = Recorder()
    assert await DecodeBatcher(recorder).decode([], True) == []
    assert recorder.calls == []


async def test_a_failing_decode_fails_only_its_group() -> None:
    def decode_many(windows: list[list[int]], skip: bool) -> list[str]:
        if skip:
            raise RuntimeError("tokenizer broke")
        return [join(window) for window in windows]

    batcher = DecodeBatcher(decode_many)
    results: list[Any] = await asyncio.gather(
        batcher.decode([[1]], True), batcher.decode([[2]], False), return_exceptions=True
    )
    assert isinstance(results[0], RuntimeError) and results[1] == ["lo"]


def test_two_phase_api_matches_add() -> None:
    stream = [[1], [2, 3], [4], [5]]
    plain = IncrementalDetokenizer(join, stop=["ld!"])
    split = IncrementalDetokenizer(join, stop=["ld!"])
    expected = [plain.add(ids) for ids in stream] + [plain.finish()]
    got = [split.deliver([join(w) for w in split.windows(ids)]) for ids in stream]
    got.append(split.finish())
    assert got == expected
    assert split.text == plain.text == "Hello wor" and split.stopped
