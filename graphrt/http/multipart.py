"""Multipart form bodies (OpenAI's image edits and audio uploads), read with aiohttp's reader.

The body is read part by part, never whole: the parts' total size is held to
`--max_request_size` as it arrives (413 naming the field that crossed it), and the number of
parts is bounded, so a client cannot make the server buffer more than the limit. Text fields are
UTF-8; file parts (those with a filename) keep their bytes and content type.

Whatever aiohttp's reader finds wrong with the body (a boundary that never comes, a part header
line that is not a header, control characters in a Content-Disposition) is the client's: a 400
saying what aiohttp said, never an internal error.
"""

from __future__ import annotations

import binascii
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from graphrt.errors import RequestTooLarge
from servables.errors import InvalidRequest
from servables.io.request_fields import Form, FormValue, UploadedFile

MAX_PARTS = 256
CHUNK = 1 << 16
# What aiohttp's multipart reader raises on a malformed body (InvalidHeader and the other
# BadHttpMessage errors come from its header parser).
MALFORMED = (ValueError, AssertionError, HttpProcessingError)


@contextmanager
def _parsing(part: str | None = None) -> Iterator[None]:
    """aiohttp's complaints about the body as InvalidRequest (a 400)."""
    try:
        yield
    except MALFORMED as error:
        reason = error.message if isinstance(error, HttpProcessingError) else str(error)
        where = f"{part}: " if part else ""
        raise InvalidRequest(
            f"Failed to parse multipart data: {where}{reason}", param=part or None
        ) from error


async def read_form(request: web.Request, limit: int) -> Form:
    """The form's fields, each name with its parts in order; see the module docstring."""
    if not request.content_type.startswith("multipart/"):
        raise InvalidRequest(
            f"Expected a multipart/form-data body, got {request.content_type or 'none'}"
        )
    with _parsing():
        reader = await request.multipart()
    form: dict[str, list[FormValue]] = {}
    total = parts = 0
    while True:
        with _parsing():
            part = await reader.next()
        if part is None:
            break
        if not isinstance(part, BodyPartReader):
            raise InvalidRequest("Failed to parse multipart data: nested multipart bodies")
        parts += 1
        if parts > MAX_PARTS:
            raise InvalidRequest(f"The form has more than {MAX_PARTS} parts")
        name = part.name or ""
        data = bytearray()
        with _parsing(name):
            while chunk := await part.read_chunk(CHUNK):
                total += len(chunk)
                if total > limit:
                    raise RequestTooLarge(
                        f"{name or 'the form'}: the request body is larger than the limit of "
                        f"{limit} bytes (see --max_request_size)",
                        param=name or None,
                    )
                data.extend(chunk)
        try:  # a Content-Transfer-Encoding (base64, quoted-printable) or compression
            decoded = part.decode(bytes(data))
        except (RuntimeError, ValueError, binascii.Error, zlib.error) as error:
            raise InvalidRequest(
                f"Failed to parse multipart data: {name or 'a part'}: {error}", param=name or None
            ) from error
        value: FormValue
        if part.filename is not None:
            content_type = part.headers.get("Content-Type", "application/octet-stream")
            value = UploadedFile(part.filename, content_type, decoded)
        else:
            try:
                value = decoded.decode(part.get_charset("utf-8"))
            except (UnicodeDecodeError, LookupError) as error:
                raise InvalidRequest(
                    f"{name}: the field is not UTF-8 text ({error})", param=name
                ) from error
        form.setdefault(name, []).append(value)
    return form
