"""Request ids: accepted or made, bound to a context, in log lines and in server errors."""

from __future__ import annotations

import asyncio
import logging

from graphrt.error_map import to_client_error
from graphrt.observability import request_ids
from graphruntime.errors import CalculatorError, GraphRunError
from servables.errors import EngineDead, InvalidRequest, ServableBusy


def test_a_reasonable_incoming_id_is_kept() -> None:
    assert request_ids.accept("req-42_abc.DEF") == "req-42_abc.DEF"


def test_unreasonable_ids_are_replaced() -> None:
    for given in (None, "", "has space", "x" * 129, "new\nline", "ünïcode"):
        made = request_ids.accept(given)
        assert made != given and len(made) == 32 and made.isalnum()
    assert request_ids.accept(None) != request_ids.accept(None)


async def test_the_id_follows_tasks_and_threads_started_inside_the_block() -> None:
    seen: list[str | None] = []

    async def task() -> None:
        seen.append(request_ids.current())

    with request_ids.bind("abc"):
        await asyncio.get_running_loop().create_task(task())
        seen.append(await asyncio.to_thread(request_ids.current))
    seen.append(request_ids.current())
    assert seen == ["abc", "abc", None]


def test_the_filter_prefixes_lines_of_a_request() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    formatter = logging.Formatter("%(request_prefix)s%(message)s|%(request_id)s")
    request_filter = request_ids.RequestIdFilter()
    request_filter.filter(record)
    assert formatter.format(record) == "hello|-"
    with request_ids.bind("r1"):
        request_filter.filter(record)
    assert formatter.format(record) == "[request r1] hello|r1"


def test_server_errors_name_the_request_and_client_errors_do_not() -> None:
    with request_ids.bind("r2"):
        assert to_client_error(RuntimeError("at /srv/x.py")).message == (
            "Internal server error (request id r2)"
        )
        assert to_client_error(EngineDead("engine gone")).message == "engine gone (request id r2)"
        assert to_client_error(InvalidRequest("bad field")).message == "bad field"


def test_a_calculator_failure_is_logged_with_its_traceback(caplog: object) -> None:
    import pytest

    assert isinstance(caplog, pytest.LogCaptureFixture)
    try:
        raise RuntimeError("injected")
    except RuntimeError as error:
        failure = GraphRunError([CalculatorError("node", "Process", error)])
    with request_ids.bind("r3"), caplog.at_level(logging.ERROR):
        mapped = to_client_error(failure)
    assert mapped.message.endswith("failed: injected (request id r3)")
    assert any(
        record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)
        for record in caplog.records
    )


def test_temporary_conditions_carry_whole_seconds_to_retry_after() -> None:
    assert to_client_error(ServableBusy("full", retry_after=1.0)).retry_after == 1
    assert to_client_error(EngineDead("gone", retry_after=6.2)).retry_after == 7
    assert to_client_error(EngineDead("gone", retry_after=0.0)).retry_after == 1
    assert to_client_error(EngineDead("gone")).retry_after is None
    assert to_client_error(InvalidRequest("bad", retry_after=3)).retry_after is None
