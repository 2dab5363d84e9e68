"""The fields of a request, from a JSON object or a multipart form, read with typed getters.

OpenAI's image and audio APIs take some requests as JSON (`/images/generations`,
`/audio/speech`) and others as multipart forms (`/images/edits`, `/audio/transcriptions`),
with the same kinds of fields. `RequestFields` reads both: a JSON member is taken as its JSON
type, a form field is a string converted strictly (" 12" or "1.5" is not an integer), so a
field's checks and messages are written once. Every protocol reads its request's top-level fields
with it (chat/completions, embeddings, rerank, images, speech, transcriptions); nested structures
(messages, tools, documents) are read by their protocol's own modules.

Each API keeps its own words for the same refusal (`Wording`): OVMS's image and audio endpoints
say "<name> field is not a int", its LLM endpoints "<name> is not an integer", and the embeddings
and rerank APIs "<name> must be an integer"; clients and OVMS users' scripts match on them. Every
message names the field as OpenAI's `param`. Fields nobody read are reported by `unused()`, which
callers refuse with OVMS's "Unhandled parameter: <name>" or ignore.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, get_args

from servables.errors import InvalidRequest

_TRUE = ("true", "1")
_FALSE = ("false", "0")


@dataclass(frozen=True)
class UploadedFile:
    """A file part of a multipart form."""

    filename: str
    content_type: str
    data: bytes


FormValue = str | UploadedFile
Form = Mapping[str, Sequence[FormValue]]


def is_integer(value: object) -> TypeGuard[int]:
    """A JSON integer: Python's bool is an int, JSON's true is not."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """A JSON number (an integer or a float, not a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def model_of(body: Mapping[str, Any]) -> str:
    """A JSON request's `model`, with OVMS's messages: read by the route to find the graph and
    by the protocols that echo it, one reader for both."""
    model = body.get("model")
    if model is None:
        raise InvalidRequest("model missing in request", param="model")
    if not isinstance(model, str):
        raise InvalidRequest("model is not a string", param="model")
    return model


Kind = Literal["string", "int", "float", "boolean", "list of strings"]


@dataclass(frozen=True)
class Wording:
    """One API's words for the refusals every reader shares; templates take {name}, and
    `missing` also {body} ("JSON body" or "multipart body")."""

    missing: str
    wrong_kind: Mapping[Kind, str]
    not_finite: str = "{name} must be a finite number"
    positive: str = "{name} must be a positive integer"
    unsigned: str = "{name} must be a non-negative integer"
    choices: str = "{name} must be one of {choices}; got {value!r}"
    # Whether a JSON float with no fraction (4.0) is read as an integer; OVMS's LLM endpoints
    # (rapidjson's IsInt) refuse it.
    whole_floats: bool = True


OVMS_MEDIA = Wording(
    missing="{name} field is missing in {body}",
    wrong_kind={kind: "{name} field is not a " + kind for kind in get_args(Kind)},
)
OVMS_LLM = Wording(
    missing="{name} missing in request",
    wrong_kind={
        "string": "{name} is not a string",
        "int": "{name} is not an integer",
        "float": "{name} is not a valid number",
        "boolean": "{name} accepts values true or false",
        "list of strings": "{name} is not an array of strings",
    },
    not_finite="{name} is not a valid number",
    unsigned="{name} is not an unsigned integer",
    whole_floats=False,
)
PLAIN = Wording(
    missing="{name} is required",
    wrong_kind={
        "string": "{name} must be a string",
        "int": "{name} must be an integer",
        "float": "{name} must be a number",
        "boolean": "{name} must be a boolean",
        "list of strings": "{name} must be an array of strings",
    },
    whole_floats=False,
)


class RequestFields:
    """See the module docstring. `form` is a multipart form (field name → its parts, in order),
    else `values` is a JSON object; `wording` is the API's (OVMS's image/audio wording unless
    told)."""

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        form: Form | None = None,
        wording: Wording = OVMS_MEDIA,
    ) -> None:
        self.wording = wording
        self.form = form is not None
        self.body = "multipart body" if self.form else "JSON body"
        self._values: dict[str, Any] = {}
        if form is not None:
            for name, parts in form.items():
                texts = [part for part in parts if isinstance(part, str)]
                files = [part for part in parts if isinstance(part, UploadedFile)]
                if name.endswith("[]"):  # OpenAI's SDKs send lists as repeated `name[]` parts
                    self._values[name[:-2]] = files or texts
                elif files:
                    self._values[name] = files
                elif texts and texts[-1] != "":  # an empty form field counts as absent
                    self._values[name] = texts[-1]
        else:
            self._values = dict(values or {})
        self._read: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def raw(self, name: str) -> Any:
        self._read.add(name)
        return self._values.get(name)

    def unused(self) -> list[str]:
        return sorted(name for name in self._values if name not in self._read)

    def refuse_unused(self, ignored: Sequence[str] = ()) -> None:
        """OVMS's refusal of a field the endpoint does not handle (`ignored` are accepted)."""
        for name in self.unused():
            if name not in ignored:
                raise InvalidRequest(f"Unhandled parameter: {name}", param=name)

    def _wrong(self, name: str, kind: Kind) -> InvalidRequest:
        return InvalidRequest(self.wording.wrong_kind[kind].format(name=name), param=name)

    def _missing(self, name: str) -> InvalidRequest:
        return InvalidRequest(self.wording.missing.format(name=name, body=self.body), param=name)

    def string(self, name: str, *, required: bool = False) -> str | None:
        value = self.raw(name)
        if value is None:
            if required:
                raise self._missing(name)
            return None
        if not isinstance(value, str):
            raise self._wrong(name, "string")
        return value

    def choice(self, name: str, choices: Sequence[str], default: str) -> str:
        value = self.string(name)
        if value is None:
            return default
        if value not in choices:
            message = self.wording.choices.format(
                name=name, choices=", ".join(choices), value=value
            )
            raise InvalidRequest(message, param=name)
        return value

    def integer(
        self, name: str, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, str) and self.form:
            if not (value.isascii() and value.removeprefix("-").isdigit()):
                raise self._wrong(name, "int")
            value = int(value)
        elif isinstance(value, float) and value.is_integer() and self.wording.whole_floats:
            value = int(value)  # JSON's 4.0 is 4
        if not is_integer(value):
            raise self._wrong(name, "int")
        if minimum is not None and value < minimum:
            raise InvalidRequest(f"{name} must be at least {minimum}; got {value}", param=name)
        if maximum is not None and value > maximum:
            raise InvalidRequest(f"{name} must be at most {maximum}; got {value}", param=name)
        return value

    def number(
        self, name: str, *, minimum: float | None = None, maximum: float | None = None
    ) -> float | None:
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, str) and self.form:
            try:
                value = float(value)
            except ValueError:
                raise self._wrong(name, "float") from None
        if not is_number(value):
            raise self._wrong(name, "float")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidRequest(self.wording.not_finite.format(name=name), param=name)
        if minimum is not None and number < minimum:
            raise InvalidRequest(f"{name} must be at least {minimum:g}; got {number:g}", param=name)
        if maximum is not None and number > maximum:
            raise InvalidRequest(f"{name} must be at most {maximum:g}; got {number:g}", param=name)
        return number

    def positive(self, name: str) -> int | None:
        """An integer of at least 1, with one message for anything else."""
        return self._at_least(name, 1, self.wording.positive)

    def unsigned(self, name: str) -> int | None:
        """An integer of at least 0, with one message for anything else."""
        return self._at_least(name, 0, self.wording.unsigned)

    def _at_least(self, name: str, minimum: int, message: str) -> int | None:
        value = self.raw(name)
        if value is None:
            return None
        if not is_integer(value) or value < minimum:
            raise InvalidRequest(message.format(name=name), param=name)
        return value

    def boolean(self, name: str) -> bool | None:
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, str) and self.form:
            lowered = value.lower()
            if lowered in _TRUE or lowered in _FALSE:
                return lowered in _TRUE
        if not isinstance(value, bool):
            raise self._wrong(name, "boolean")
        return value

    def strings(self, name: str) -> list[str] | None:
        """A list of strings: a JSON array, repeated `name[]` form parts, or one form field."""
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, str) and self.form:
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._wrong(name, "list of strings")
        return list(value)

    def files(self, name: str, *, required: bool = False) -> list[UploadedFile]:
        """The file parts of a form field (sent as `name` or as `name[]`)."""
        value = self.raw(name)
        if value is None or value == []:
            if required:
                raise self._missing(name)
            return []
        if not isinstance(value, list) or not all(isinstance(v, UploadedFile) for v in value):
            raise InvalidRequest(f"{name} must be a file part of the form", param=name)
        return list(value)
