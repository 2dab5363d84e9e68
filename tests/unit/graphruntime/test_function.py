"""calculator_function: plain (sync or async) functions as calculators."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from graphruntime import Graph, GraphRunError, Packet, calculator_function
from graphruntime.registry import calculators


@calculator_function(inputs=["TEXT"], outputs=["TEXT"], name="TestFunctionShoutCalculator")
def shout(text: str) -> str:
    return text.upper() + "!"


@calculator_function(inputs=["A", "B"], outputs=["SUM", "DIFF"], name="TestFunctionMathCalculator")
def math(a: int | None, b: int | None) -> tuple[int | None, int | None] | None:
    if a is None and b is None:
        return None
    if a is None or b is None:
        return (a if b is None else b), None  # DIFF skipped: only SUM is sent
    return a + b, a - b


@calculator_function(inputs=["N"], outputs=["EVEN"], name="TestFunctionEvenCalculator")
async def even(n: int) -> int | None:
    await asyncio.sleep(0)
    return n if n % 2 == 0 else None


THREADS: list[int] = []


@calculator_function(
    inputs=["X"], outputs=["Y"], name="TestFunctionBlockingCalculator", blocking=True
)
def blocking_double(x: int) -> int:
    THREADS.append(threading.get_ident())
    return 2 * x


@calculator_function(inputs=["X"], outputs=["A", "B"], name="TestFunctionWrongArityCalculator")
def wrong_arity(x: int) -> tuple[int, int, int]:
    return x, x, x


async def collect(
    text: str, feeds: list[tuple[str, Any, int]], outputs: list[str]
) -> dict[str, list[tuple[Any, int]]]:
    graph = Graph(text)
    got: dict[str, list[tuple[Any, int]]] = {name: [] for name in outputs}
    for name in outputs:
        graph.observe_output_stream(name, lambda n, p: got[n].append((p.payload, int(p.timestamp))))
    await graph.start_run()
    for stream, payload, t in feeds:
        await graph.add_packet(stream, Packet(payload, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return got


def test_functions_are_registered_by_name() -> None:
    assert calculators.get("TestFunctionShoutCalculator") is shout
    assert shout.__name__ == "TestFunctionShoutCalculator"
    assert not shout.blocking


async def test_sync_function_gets_payloads_and_outputs_at_the_input_timestamp() -> None:
    got = await collect(
        """
        input_stream: "in"
        node { calculator: "TestFunctionShoutCalculator" input_stream: "TEXT:in"
               output_stream: "TEXT:out" }
        """,
        [("in", "hi", 3), ("in", "yo", 9)],
        ["out"],
    )
    assert got == {"out": [("HI!", 3), ("YO!", 9)]}


async def test_missing_inputs_are_none_and_none_outputs_are_skipped() -> None:
    got = await collect(
        """
        input_stream: "a"
        input_stream: "b"
        node { calculator: "TestFunctionMathCalculator" input_stream: "A:a" input_stream: "B:b"
               output_stream: "SUM:sum" output_stream: "DIFF:diff" }
        """,
        [("a", 5, 0), ("b", 3, 0), ("a", 7, 1), ("b", 1, 2)],
        ["sum", "diff"],
    )
    assert got == {"sum": [(8, 0), (7, 1), (1, 2)], "diff": [(2, 0)]}


async def test_async_function_and_skipped_outputs_still_advance_the_bound() -> None:
    graph = Graph(
        """
        input_stream: "in"
        node { calculator: "TestFunctionEvenCalculator" input_stream: "N:in"
               output_stream: "EVEN:even" }
        """
    )
    seen: list[tuple[Any, int]] = []
    graph.observe_output_stream(
        "even",
        lambda _, p: seen.append((None if p.is_empty() else p.payload, int(p.timestamp))),
        observe_timestamp_bounds=True,
    )
    await graph.start_run()
    for t in range(4):
        await graph.add_packet("in", Packet(t, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    # Odd inputs send nothing, but the offset-0 contract settles their timestamps.
    assert seen == [(0, 0), (None, 1), (2, 2), (None, 3)]


async def test_blocking_function_runs_on_a_worker_thread() -> None:
    THREADS.clear()
    got = await collect(
        """
        input_stream: "in"
        node { calculator: "TestFunctionBlockingCalculator" input_stream: "X:in"
               output_stream: "Y:out" }
        """,
        [("in", 21, 0)],
        ["out"],
    )
    assert got == {"out": [(42, 0)]}
    assert THREADS and THREADS[0] != threading.get_ident()


async def test_wrong_number_of_returned_values_fails_the_run() -> None:
    with pytest.raises(GraphRunError, match="function returned 3 values for 2 outputs"):
        await collect(
            """
            input_stream: "in"
            node { calculator: "TestFunctionWrongArityCalculator" input_stream: "X:in"
                   output_stream: "A:a" output_stream: "B:b" }
            """,
            [("in", 1, 0)],
            [],
        )
