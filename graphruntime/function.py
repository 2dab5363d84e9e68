"""Turn a plain function into a calculator, for quick custom logic without a class.

    @calculator_function(inputs=["TEXT"], outputs=["TEXT"])
    def ShoutCalculator(text: str) -> str:
        return text.upper() + "!"

The function gets one argument per input tag (the payload, or None when that input has no packet
at this timestamp) and returns one value per output tag (a tuple when there are several; None
sends nothing). Outputs are stamped with the input timestamp. `async def` functions work too.
Sync functions are assumed cheap and run inline; pass `blocking=True` for slow ones.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from graphruntime.calculator import Calculator
from graphruntime.context import CalculatorContext
from graphruntime.contract import CalculatorContract
from graphruntime.registry import register_calculator


def _emit(cc: CalculatorContext, outputs: Sequence[str], result: Any) -> None:
    if not outputs or result is None:
        return
    values = result if len(outputs) > 1 else (result,)
    if len(values) != len(outputs):
        raise ValueError(f"function returned {len(values)} values for {len(outputs)} outputs")
    for tag, value in zip(outputs, values, strict=True):
        if value is not None:
            cc.outputs[tag].add(value)


def calculator_function(
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str | None = None,
    blocking: bool = False,
) -> Callable[[Callable[..., Any]], type[Calculator]]:
    """Decorator: register `function` as a calculator named after it (or `name`)."""

    def build(function: Callable[..., Any]) -> type[Calculator]:
        input_tags = tuple(inputs)
        output_tags = tuple(outputs)

        def arguments(cc: CalculatorContext) -> list[Any]:
            return [None if (p := cc.inputs[tag]).is_empty() else p.payload for tag in input_tags]

        @classmethod  # type: ignore[misc]
        def get_contract(cls: type[Calculator], cc: CalculatorContract) -> None:
            for tag in input_tags:
                cc.inputs.declare(tag)
            for tag in output_tags:
                cc.outputs.declare(tag)
            cc.set_timestamp_offset(0)

        namespace: dict[str, Any] = {
            "get_contract": get_contract,
            "blocking": blocking,
            "__doc__": function.__doc__,
            "__module__": function.__module__,
        }
        if inspect.iscoroutinefunction(function):

            async def process_async(self: Calculator, cc: CalculatorContext) -> None:
                _emit(cc, output_tags, await function(*arguments(cc)))

            namespace["process"] = process_async
        else:

            def process(self: Calculator, cc: CalculatorContext) -> Awaitable[None] | None:
                _emit(cc, output_tags, function(*arguments(cc)))
                return None

            namespace["process"] = process
        calculator_name = name or function.__name__
        calculator: type[Calculator] = type(calculator_name, (Calculator,), namespace)
        register_calculator(name=calculator_name)(calculator)
        return calculator

    return build
