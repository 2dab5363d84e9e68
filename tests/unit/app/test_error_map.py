"""to_client_error: every exception class → HTTP status, OpenAI error type and code.

Graph failures are unwrapped to the ServableError a calculator raised; anything unexpected is a
500 that says only "Internal server error".
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from graphrt.error_map import TABLE, ClientError, root_cause, to_client_error
from graphrt.errors import NotFound, RequestTooLarge, Unauthorized
from graphruntime.errors import (
    CalculatorError,
    GraphConfigError,
    GraphError,
    GraphRunError,
    GraphValidationError,
    ValidationIssue,
)
from servables.errors import (
    EngineDead,
    InvalidRequest,
    ModelNotFound,
    RequestCancelled,
    ServableBusy,
    ServableError,
    ServableLoadError,
    ServableNotReady,
    UnsupportedEndpoint,
    readable_message,
)

CASES = [
    (InvalidRequest, 400, "invalid_request_error", None),
    (Unauthorized, 401, "invalid_request_error", "invalid_api_key"),
    (ModelNotFound, 404, "invalid_request_error", "model_not_found"),
    (UnsupportedEndpoint, 404, "invalid_request_error", "unsupported_endpoint"),
    (NotFound, 404, "invalid_request_error", None),
    (RequestTooLarge, 413, "invalid_request_error", "request_too_large"),
    (RequestCancelled, 499, "invalid_request_error", "cancelled"),
    (EngineDead, 503, "server_error", "engine_unavailable"),
    (ServableBusy, 503, "server_error", "queue_full"),
    (ServableNotReady, 503, "server_error", "model_not_ready"),
    (ServableLoadError, 503, "server_error", "model_not_ready"),
    (ServableError, 500, "server_error", None),
]


@pytest.mark.parametrize(("klass", "status", "error_type", "code"), CASES)
def test_servable_errors(
    klass: type[ServableError], status: int, error_type: str, code: str | None
) -> None:
    error = klass("what went wrong", param="field")
    expected = ClientError(status, "what went wrong", error_type, "field", code)
    assert to_client_error(error) == expected


@pytest.mark.parametrize(("klass", "status", "error_type", "code"), CASES)
def test_an_explicit_code_wins(
    klass: type[ServableError], status: int, error_type: str, code: str | None
) -> None:
    mapped = to_client_error(klass("m", code="custom_code"))
    assert (mapped.status, mapped.error_type, mapped.code) == (status, error_type, "custom_code")
    assert mapped.param is None


def test_table_lists_subclasses_before_their_bases() -> None:
    classes = [klass for klass, _ in TABLE]
    for i, earlier in enumerate(classes):
        for later in classes[i + 1 :]:
            assert not issubclass(later, earlier) or later is earlier, (
                f"{later.__name__} comes after its base {earlier.__name__}"
            )
    assert {klass for klass, *_ in CASES} == set(classes)


# -------------------------------------------------------------------------- graph failures


def calculator_failure(cause: BaseException, node: str = "LLMExecutor") -> CalculatorError:
    return CalculatorError(node, "Process", cause)


def test_calculator_error_is_unwrapped() -> None:
    cause = InvalidRequest("temperature out of range(0.0, 2.0)", param="temperature")
    mapped = to_client_error(calculator_failure(cause))
    assert mapped == ClientError(
        400, "temperature out of range(0.0, 2.0)", "invalid_request_error", "temperature", None
    )


def test_graph_run_error_is_unwrapped() -> None:
    cause = InvalidRequest("Messages array cannot be empty", param="messages")
    error = GraphRunError([calculator_failure(cause)])
    assert root_cause(error) is cause
    mapped = to_client_error(error)
    assert (mapped.status, mapped.message, mapped.param) == (
        400,
        "Messages array cannot be empty",
        "messages",
    )


def test_graph_run_error_prefers_the_servable_error() -> None:
    servable = ModelNotFound("The model `x` does not exist.", param="model")
    error = GraphRunError(
        [
            calculator_failure(RuntimeError("downstream"), node="Other"),
            GraphError("something else"),
            calculator_failure(servable),
        ]
    )
    assert root_cause(error) is servable
    assert to_client_error(error).status == 404


def test_nested_graph_run_errors_are_unwrapped() -> None:
    cause = EngineDead("engine process exited")
    inner = GraphRunError([calculator_failure(cause)])
    outer = GraphRunError([inner])
    mapped = to_client_error(outer)
    assert (mapped.status, mapped.code, mapped.message) == (
        503,
        "engine_unavailable",
        "engine process exited",
    )


def test_user_calculator_failure_keeps_its_graph_message() -> None:
    # A GraphError's message names node and phase and is meant for users.
    error = GraphRunError([calculator_failure(ValueError("bad packet"), node="MyNode")])
    mapped = to_client_error(error)
    assert mapped == ClientError(
        500,
        'Calculator::Process() for node "MyNode" failed: bad packet',
        "server_error",
        None,
        None,
    )


def test_empty_graph_run_error() -> None:
    error = GraphRunError([])
    assert root_cause(error) is error
    mapped = to_client_error(error)
    assert (mapped.status, mapped.error_type) == (500, "server_error")
    assert mapped.message == error.message


@pytest.mark.parametrize(
    "error",
    [
        GraphConfigError("unknown field foo"),
        GraphValidationError([ValidationIssue("stream x has no producer")]),
    ],
)
def test_other_graph_errors(error: GraphError) -> None:
    assert to_client_error(error) == ClientError(500, error.message, "server_error", None, None)


# ------------------------------------------------------------------------ unexpected errors


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("secret at /home/user/models/key.bin"),
        KeyError("internal_key"),
        ValueError("password=hunter2"),
        AssertionError("invariant broken"),
        asyncio.CancelledError(),
    ],
    ids=["runtime", "key", "value", "assertion", "cancelled"],
)
def test_unknown_exceptions_hide_internals(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="graphrt.error_map"):
        mapped = to_client_error(error)
    assert mapped == ClientError(500, "Internal server error", "server_error", None, None)
    # The details go to the log, not to the client.
    assert any(record.exc_info and record.exc_info[1] is error for record in caplog.records)


def test_server_errors_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="graphrt.error_map"):
        to_client_error(ServableLoadError("model files missing"))
        to_client_error(InvalidRequest("client mistake"))
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["request failed: model files missing"]


OPENVINO_FAILURE = (
    "Exception from src/inference/src/cpp/infer_request.cpp:224:\n"
    "Exception from /home/jenkins/agent/workspace/private-ci/ie/build-linux-manylinux_2_28/b/"
    "repos/openvino/src/plugins/intel_cpu/src/node.cpp:792:\n"
    "[CPU] Gather node with name 'Gather_1' Check 'idx < axisDim' failed at "
    "src/plugins/intel_cpu/src/nodes/gather.cpp:123:\nindex 30522 is out of range\n"
)


def test_openvino_source_locations_are_stripped_from_graph_failures() -> None:
    error = GraphRunError(
        [calculator_failure(RuntimeError(OPENVINO_FAILURE), node="RerankExecutor")]
    )
    mapped = to_client_error(error)
    assert mapped.status == 500
    assert mapped.message == (
        'Calculator::Process() for node "RerankExecutor" failed: [CPU] Gather node with name '
        "'Gather_1' Check 'idx < axisDim' failed: index 30522 is out of range"
    )


def test_openvino_source_locations_are_stripped_from_servable_errors() -> None:
    mapped = to_client_error(ServableError("inference failed: " + OPENVINO_FAILURE))
    assert ".cpp" not in mapped.message and "jenkins" not in mapped.message
    assert "index 30522 is out of range" in mapped.message


@pytest.mark.parametrize(
    "message",
    [
        "input[0] has 600 tokens, more than the model's context of 512 tokens",
        "cannot read /models/x/config.json: bad JSON",
        "max_length must be at most 512 (the model's context)",
    ],
)
def test_plain_messages_are_kept(message: str) -> None:
    assert readable_message(message) == message
