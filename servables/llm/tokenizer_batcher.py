"""Batching the tokenizer calls of concurrent requests into one call per event-loop turn.

A tokenizer call (an OpenVINO inference of the tokenizer or detokenizer model) costs a fixed
~0.1-0.2 ms when it runs over and over, and 0.5-1 ms inside the server, where each call finds
the caches cold, whatever its size; 8 texts cost about what one does. Two kinds of calls come in
crowds:

- decodes: after an engine step, every streaming request it woke wakes in the same loop turn and
  needs one or two small decodes (the incremental detokenizers, servables.llm.detokenizer);
- encodes: requests that arrive together (a burst of clients, the successors of requests that
  finished in the same engine step) reach their prompt's tokenization in the same loop turn.
  Measured on SmolLM2 with bursts of 32 chats: 1.4-2.2 ms of frontend CPU per request with one
  encode each, 0.9-1.5 ms with the burst's prompts encoded together.

Each caller awaits `run`; the batch goes to the tokenizer when the loop gets to the scheduled
flush, right after every caller already woken in the same turn has asked. A lone caller pays one
loop turn (microseconds) for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class TokenizerBatcher(Generic[Item, Result]):
    """Runs `run_many(items, flag)` once per flag for every caller of one loop turn.

    `flag` is the call's one option (skip special tokens, add special tokens); callers with
    different flags go in different calls. When a shared call fails, each of its callers is run
    on its own, so that only a caller whose own items fail gets the error.
    """

    def __init__(self, run_many: Callable[[list[Item], bool], list[Result]]) -> None:
        self._run_many = run_many
        self._pending: list[tuple[list[Item], bool, asyncio.Future[list[Result]]]] = []
        self._scheduled = False

    async def run(self, items: list[Item], flag: bool) -> list[Result]:
        """`run_many`'s results for `items`, in order."""
        if not items:
            return []
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Result]] = loop.create_future()
        self._pending.append((items, flag, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, []
        for flag in (True, False):
            group = [entry for entry in pending if entry[1] is flag]
            if not group:
                continue
            flat = [item for items, _, _ in group for item in items]
            try:
                results = self._run_many(flat, flag)
            except Exception as error:
                if len(group) == 1:
                    _fail(group[0][2], error)
                else:  # whose items fail? each caller alone
                    for items, _, future in group:
                        self._run_alone(items, flag, future)
                continue
            position = 0
            for items, _, future in group:
                part = results[position : position + len(items)]
                position += len(items)
                if not future.done():
                    future.set_result(part)

    def _run_alone(
        self, items: list[Item], flag: bool, future: asyncio.Future[list[Result]]
    ) -> None:
        if future.done():  # the caller went away
            return
        try:
            result = self._run_many(items, flag)
        except Exception as error:
            _fail(future, error)
        else:
            future.set_result(result)


def _fail(future: asyncio.Future[Any], error: Exception) -> None:
    if not future.done():
        future.set_exception(error)
