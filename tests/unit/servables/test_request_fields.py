"""RequestFields: one set of typed getters over JSON bodies and multipart forms.

A JSON member keeps its JSON type; a form field is text converted strictly. Every refusal is an
InvalidRequest naming the field as `param`, in the wording of the API that reads it.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.io.request_fields import (
    OVMS_LLM,
    OVMS_MEDIA,
    PLAIN,
    Form,
    RequestFields,
    UploadedFile,
    Wording,
)

PNG = UploadedFile("a.png", "image/png", b"\x89PNG")
WAV = UploadedFile("b.wav", "audio/wav", b"RIFF")


def form(**fields: str | UploadedFile | list[str | UploadedFile]) -> RequestFields:
    """A form from keyword fields (a list: repeated parts); `x__` stands for `x[]`."""
    parts: dict[str, list[str | UploadedFile]] = {}
    for name, value in fields.items():
        parts[name.replace("__", "[]")] = value if isinstance(value, list) else [value]
    built: Form = parts
    return RequestFields(form=built)


def refused(call: Any, *args: Any, **kwargs: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call(*args, **kwargs)
    return caught.value


# ------------------------------------------------------------------------------------- integers


@pytest.mark.parametrize(("text", "value"), [("12", 12), ("-3", -3), ("0", 0), ("007", 7)])
def test_form_integers(text: str, value: int) -> None:
    assert form(n=text).integer("n") == value


@pytest.mark.parametrize("text", [" 12", "12 ", "1.5", "abc", "1e3", "+4", "0x10", "-", "٣"])
def test_form_integers_are_strict(text: str) -> None:
    """What Python's int() would forgive (blanks, a sign, Unicode digits) is refused too."""
    error = refused(form(n=text).integer, "n")
    assert error.message == "n field is not a int" and error.param == "n"


def test_a_doubled_minus_sign_is_refused_not_raised_as_a_crash() -> None:
    """ "--5" has only ASCII digits once every leading "-" is stripped, but int() refuses it:
    it must be the field's 400, not a ValueError (a 500)."""
    error = refused(form(n="--5").integer, "n")
    assert error.message == "n field is not a int" and error.param == "n"


def test_json_integers() -> None:
    fields = RequestFields({"a": 4, "b": 4.0, "c": -2})
    assert fields.integer("a") == 4
    whole = fields.integer("b")
    assert whole == 4 and type(whole) is int  # JSON's 4.0 is 4, returned as an int
    assert fields.integer("c") == -2
    assert fields.integer("missing") is None


@pytest.mark.parametrize("value", [True, False, 4.5, "4", [4], {"n": 4}, float("inf")])
def test_json_non_integers_are_refused(value: Any) -> None:
    """A JSON string is not converted (only forms carry numbers as text); bools are not ints."""
    error = refused(RequestFields({"n": value}).integer, "n")
    assert error.message == "n field is not a int" and error.param == "n"


def test_integer_bounds() -> None:
    fields = RequestFields({"low": 0, "high": 11, "ok": 5})
    assert refused(fields.integer, "low", minimum=1).message == "low must be at least 1; got 0"
    assert refused(fields.integer, "high", maximum=10).message == "high must be at most 10; got 11"
    assert fields.integer("ok", minimum=5, maximum=5) == 5
    assert refused(form(n="11").integer, "n", maximum=10).param == "n"


# -------------------------------------------------------------------------------------- numbers


def test_numbers_from_json_and_forms() -> None:
    assert RequestFields({"t": 1}).number("t") == 1.0
    assert RequestFields({"t": 0.25}).number("t") == 0.25
    assert form(t="0.5").number("t") == 0.5
    assert form(t="3").number("t") == 3.0
    assert form(t="-1e-2").number("t") == -0.01
    assert RequestFields({"t": None}).number("t") is None  # JSON null is absent


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (RequestFields({"t": "0.5"}), "t field is not a float"),
        (RequestFields({"t": True}), "t field is not a float"),
        (RequestFields({"t": [1.0]}), "t field is not a float"),
        (form(t="abc"), "t field is not a float"),
        (form(t="nan"), "t must be a finite number"),
        (form(t="inf"), "t must be a finite number"),
        (RequestFields({"t": float("nan")}), "t must be a finite number"),
        (RequestFields({"t": float("-inf")}), "t must be a finite number"),
    ],
)
def test_number_refusals(fields: RequestFields, message: str) -> None:
    error = refused(fields.number, "t")
    assert error.message == message and error.param == "t"


def test_number_bounds_are_written_without_trailing_zeros() -> None:
    fields = RequestFields({"t": 1.5, "s": -0.5})
    error = refused(fields.number, "t", minimum=0.0, maximum=1.0)
    assert error.message == "t must be at most 1; got 1.5" and error.param == "t"
    assert refused(fields.number, "s", minimum=0.0).message == "s must be at least 0; got -0.5"
    assert fields.number("t", minimum=1.5, maximum=1.5) == 1.5


# ------------------------------------------------------------------------------------- booleans


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("False", False), ("0", False)],
)
def test_form_booleans(text: str, value: bool) -> None:
    assert form(stream=text).boolean("stream") is value


@pytest.mark.parametrize("text", ["yes", "on", "2", " true"])
def test_form_boolean_refusals(text: str) -> None:
    error = refused(form(stream=text).boolean, "stream")
    assert error.message == "stream field is not a boolean" and error.param == "stream"


def test_json_booleans_are_json_booleans() -> None:
    assert RequestFields({"stream": False}).boolean("stream") is False
    for value in ("true", 1, 0):  # text and numbers count only in forms
        error = refused(RequestFields({"stream": value}).boolean, "stream")
        assert error.message == "stream field is not a boolean"


# -------------------------------------------------------------------------------------- strings


def test_strings_and_choices() -> None:
    fields = RequestFields({"prompt": "a cat", "n": 3, "fmt": "jpeg", "bad": "gif"})
    assert fields.string("prompt") == "a cat"
    assert refused(fields.string, "n").message == "n field is not a string"
    assert fields.choice("fmt", ("png", "jpeg"), "png") == "jpeg"
    assert fields.choice("absent", ("png", "jpeg"), "png") == "png"
    error = refused(fields.choice, "bad", ("png", "jpeg"), "png")
    assert error.message == "bad must be one of png, jpeg; got 'gif'" and error.param == "bad"


def test_required_fields_name_the_body() -> None:
    error = refused(RequestFields({}).string, "prompt", required=True)
    assert error.message == "prompt field is missing in JSON body" and error.param == "prompt"
    error = refused(form().string, "prompt", required=True)
    assert error.message == "prompt field is missing in multipart body"


def test_an_empty_form_field_is_absent() -> None:
    """As OVMS's multipart parser: an empty value is no value (clients send empty defaults)."""
    fields = form(prompt="", n="", stream="")
    assert "prompt" not in fields
    assert fields.string("prompt") is None
    assert fields.integer("n") is None and fields.boolean("stream") is None
    assert fields.unused() == []
    assert RequestFields({"prompt": ""}).string("prompt") == ""  # JSON "" is a value


def test_a_repeated_form_field_takes_its_last_value() -> None:
    assert form(n=["1", "2"]).integer("n") == 2


# ---------------------------------------------------------------------------------------- lists


def test_string_lists() -> None:
    assert form(timestamp_granularities__=["word", "segment"]).strings(
        "timestamp_granularities"
    ) == ["word", "segment"]
    assert form(timestamp_granularities="word").strings("timestamp_granularities") == ["word"]
    assert RequestFields({"g": ["a", "b"]}).strings("g") == ["a", "b"]
    assert RequestFields({}).strings("g") is None
    for value in ("a", ["a", 1], {"a": 1}):
        error = refused(RequestFields({"g": value}).strings, "g")
        assert error.message == "g field is not a list of strings" and error.param == "g"


def test_files() -> None:
    fields = form(image=PNG, mask__=[PNG, WAV], prompt="p")
    assert fields.files("image") == [PNG]
    assert fields.files("mask") == [PNG, WAV]  # sent as `mask[]`, read as `mask`
    assert fields.files("other") == []
    error = refused(fields.files, "other", required=True)
    assert error.message == "other field is missing in multipart body" and error.param == "other"
    error = refused(fields.files, "prompt")
    assert error.message == "prompt must be a file part of the form" and error.param == "prompt"
    error = refused(fields.string, "image")  # a file where text is expected
    assert error.message == "image field is not a string"


def test_files_win_over_text_parts_of_the_same_name() -> None:
    fields = form(image=["just text", PNG])
    assert fields.files("image") == [PNG]


# ---------------------------------------------------------------------------------- unused ones


def test_unused_lists_the_fields_nobody_read() -> None:
    fields = RequestFields({"prompt": "p", "zeta": 1, "alpha": 2})
    assert fields.unused() == ["alpha", "prompt", "zeta"]
    fields.string("prompt")
    fields.raw("zeta")
    assert fields.unused() == ["alpha"]


def test_refuse_unused_is_ovms_unhandled_parameter() -> None:
    fields = RequestFields({"prompt": "p", "x": 1, "user": "u"})
    fields.string("prompt")
    error = refused(fields.refuse_unused, ("user",))
    assert error.message == "Unhandled parameter: x" and error.param == "x"
    fields.raw("x")
    fields.refuse_unused(("user",))  # what is ignored by name is accepted
    assert refused(fields.refuse_unused).param == "user"


def test_a_field_read_but_refused_is_not_reported_again() -> None:
    """A getter marks its field read even when it refuses the value (one error per field)."""
    fields = form(n="x")
    with pytest.raises(InvalidRequest):
        fields.integer("n")
    assert fields.unused() == []


# -------------------------------------------------------------------------------------- wording


@pytest.mark.parametrize(
    ("wording", "wrong_type", "missing", "whole_float"),
    [
        (OVMS_MEDIA, "size field is not a int", "size field is missing in JSON body", 4),
        (OVMS_LLM, "size is not an integer", "size missing in request", None),
        (PLAIN, "size must be an integer", "size is required", None),
    ],
)
def test_each_api_keeps_its_wording_for_the_same_refusal(
    wording: Wording, wrong_type: str, missing: str, whole_float: int | None
) -> None:
    """One reader, each API's words: OVMS's image/audio endpoints, its LLM endpoints (which
    also refuse 4.0 as an integer, as rapidjson's IsInt does) and the embeddings/rerank APIs."""
    error = refused(RequestFields({"size": "4"}, wording=wording).integer, "size")
    assert (error.message, error.param) == (wrong_type, "size")
    error = refused(RequestFields({}, wording=wording).string, "size", required=True)
    assert (error.message, error.param) == (missing, "size")
    whole = RequestFields({"size": 4.0}, wording=wording)
    if whole_float is None:
        assert refused(whole.integer, "size").message == wrong_type
    else:
        assert whole.integer("size") == whole_float


def test_positive_and_unsigned_have_one_message_for_any_wrong_value() -> None:
    for value in (0, -1, 1.5, "2", True):
        assert refused(RequestFields({"n": value}, wording=OVMS_LLM).positive, "n").message == (
            "n must be a positive integer"
        )
    for value in (-1, 1.5, "2", True):
        assert refused(RequestFields({"n": value}, wording=OVMS_LLM).unsigned, "n").message == (
            "n is not an unsigned integer"
        )
    fields = RequestFields({"a": 1, "b": 0}, wording=PLAIN)
    assert (fields.positive("a"), fields.unsigned("b"), fields.positive("c")) == (1, 0, None)
