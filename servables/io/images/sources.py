"""Where a request's images may come from, and fetching their bytes under the server's policy.

An `image_url` is one of (OVMS's rules and messages, with the reason added where OVMS logs it):

* a base64 data URL, `data:image/png;base64,...`: always allowed;
* an http(s) URL: only when its host is listed in `--allowed_media_domains` (`all` allows any
  host; unset, the default, allows none). Redirects are not followed (a redirect could leave the
  allowed hosts); the download has a time limit and a size cap;
* anything else is a local path: only when `--allowed_local_media_path` is set. A relative path is
  taken relative to that folder; the path is resolved (symlinks, `..`) and must stay inside it,
  and the file itself is opened without following a symlink, so nothing can point outside.

Bytes are decoded by `servables.io.images.images` in worker threads, so a large image never stalls
the event loop; the images of one request load concurrently and keep their order.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import os
import re
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aiohttp

from servables.errors import InvalidRequest
from servables.io.images.images import ImageArray, ImageLimits, decode_image

logger = logging.getLogger(__name__)

LOCAL_DISABLED = "Loading images from local filesystem is disabled."
NOT_SUBPATH = "Given filepath is not subpath of allowed_local_media_path"
DOMAIN_NOT_ALLOWED = "Given url does not match any allowed domain from allowed_media_domains"
INVALID_BASE64 = "Invalid base64 string in request"
DOWNLOAD_FAILED = "Image downloading failed"
FILE_FAILED = "Image file parsing failed"

ALL_DOMAINS = "all"
DEFAULT_DOWNLOAD_TIMEOUT = 10.0
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_CHUNK = 1 << 16


@dataclass(frozen=True)
class MediaPolicy:
    """The server's media settings; the default allows data URLs only."""

    local_root: Path | None = None  # resolved --allowed_local_media_path
    domains: frozenset[str] | None = None  # --allowed_media_domains, lower case
    download_timeout: float = DEFAULT_DOWNLOAD_TIMEOUT
    limits: ImageLimits = field(default_factory=ImageLimits)

    @classmethod
    def from_flags(
        cls,
        allowed_local_media_path: str | None,
        allowed_media_domains: Sequence[str] | None,
        download_timeout: float = DEFAULT_DOWNLOAD_TIMEOUT,
    ) -> MediaPolicy:
        """Build from the CLI values; ValueError names a flag whose value cannot work."""
        root = None
        if allowed_local_media_path:
            root = Path(allowed_local_media_path).resolve()
            if not root.is_dir():
                raise ValueError(
                    f"--allowed_local_media_path {allowed_local_media_path} is not a directory"
                )
        domains = None
        if allowed_media_domains is not None:
            domains = frozenset(d.strip().lower() for d in allowed_media_domains if d.strip())
        if download_timeout <= 0:
            raise ValueError("--media_download_timeout must be greater than 0")
        return cls(root, domains, download_timeout)

    def allows_host(self, host: str | None) -> bool:
        if self.domains is None or not host:
            return False
        return ALL_DOMAINS in self.domains or host.lower() in self.domains


def source_kind(source: str) -> str:
    """How `load_image` treats this image_url: "data", "url" or "path"."""
    if source.startswith("data:"):
        return "data"
    match = _SCHEME.match(source)
    if match and match.group(1).lower() != "file":
        return "url"
    return "path"


# ------------------------------------------------------------------------------------- bytes


def _data_url_bytes(source: str, limits: ImageLimits, param: str | None) -> bytes:
    header, comma, payload = source.partition(",")
    if not comma or not header.lower().endswith(";base64"):
        raise InvalidRequest(
            "Image data URLs must be base64 encoded (data:<media type>;base64,<data>)", param=param
        )
    if len(payload) > limits.max_bytes * 4 // 3 + 8:
        raise InvalidRequest(
            f"Image is larger than the limit of {limits.max_bytes} bytes", param=param
        )
    text = "".join(payload.split())  # tolerate line-wrapped base64
    text += "=" * (-len(text) % 4)  # and missing padding, as OVMS (absl) does
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidRequest(INVALID_BASE64, param=param) from error


def _local_path(source: str) -> str:
    if source.lower().startswith("file://"):
        parsed = urlsplit(source)
        if parsed.netloc not in ("", "localhost"):
            raise InvalidRequest("file:// URLs must not name a host")
        return unquote(parsed.path)
    return source


def _file_bytes(source: str, policy: MediaPolicy, param: str | None) -> bytes:
    root = policy.local_root
    if root is None:
        raise InvalidRequest(LOCAL_DISABLED, param=param)
    try:
        path = Path(_local_path(source))
        resolved = (path if path.is_absolute() else root / path).resolve()
    except (OSError, RuntimeError, ValueError) as error:  # NUL bytes, symlink loops
        raise InvalidRequest(f"{FILE_FAILED}: invalid path", param=param) from error
    if not resolved.is_relative_to(root):
        raise InvalidRequest(NOT_SUBPATH, param=param)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        descriptor = os.open(resolved, flags)
    except FileNotFoundError as error:
        raise InvalidRequest(
            f"{FILE_FAILED}: {source} does not exist under allowed_local_media_path", param=param
        ) from error
    except OSError as error:
        raise InvalidRequest(f"{FILE_FAILED}: {source} cannot be opened", param=param) from error
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise InvalidRequest(f"{FILE_FAILED}: {source} is not a regular file", param=param)
        if info.st_size > policy.limits.max_bytes:
            raise InvalidRequest(
                f"Image is larger than the limit of {policy.limits.max_bytes} bytes", param=param
            )
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(policy.limits.max_bytes + 1)
    except OSError as error:
        raise InvalidRequest(f"{FILE_FAILED}: {source} cannot be read", param=param) from error
    finally:
        os.close(descriptor)


async def _download(
    url: str, policy: MediaPolicy, session: aiohttp.ClientSession, param: str | None
) -> bytes:
    limit = policy.limits.max_bytes

    def failed(reason: str) -> InvalidRequest:
        return InvalidRequest(f"{DOWNLOAD_FAILED}: {reason}", param=param)

    timeout = aiohttp.ClientTimeout(total=policy.download_timeout)
    try:
        async with session.get(url, allow_redirects=False, timeout=timeout) as response:
            if response.status != 200:
                hint = " (redirects are not followed)" if 300 <= response.status < 400 else ""
                raise failed(f"the server answered HTTP {response.status}{hint}")
            if response.content_length is not None and response.content_length > limit:
                raise failed(f"the image is larger than the limit of {limit} bytes")
            data = bytearray()
            async for chunk in response.content.iter_chunked(_CHUNK):
                data += chunk
                if len(data) > limit:
                    raise failed(f"the image is larger than the limit of {limit} bytes")
            return bytes(data)
    except asyncio.TimeoutError as error:
        raise failed(f"no complete answer within {policy.download_timeout:g} s") from error
    except aiohttp.ClientError as error:
        raise failed(str(error) or type(error).__name__) from error


async def _bytes_of(
    source: str,
    policy: MediaPolicy,
    session: aiohttp.ClientSession | None,
    param: str | None,
) -> bytes:
    kind = source_kind(source)
    if kind == "data":
        return _data_url_bytes(source, policy.limits, param)
    if kind == "url":
        try:
            parts = urlsplit(source)
            host = parts.hostname
        except ValueError as error:
            raise InvalidRequest(f"Invalid image URL: {error}", param=param) from None
        if parts.scheme.lower() not in ("http", "https"):
            raise InvalidRequest(
                f"Unsupported image URL scheme {parts.scheme!r}: use http(s), a base64 data URL "
                "or a local path",
                param=param,
            )
        if not policy.allows_host(host):
            raise InvalidRequest(DOMAIN_NOT_ALLOWED, param=param)
        assert session is not None
        return await _download(source, policy, session, param)
    return await asyncio.to_thread(_file_bytes, source, policy, param)


# -------------------------------------------------------------------------------------- entry


@dataclass(frozen=True)
class LoadedImage:
    pixels: ImageArray
    kind: str  # data / url / path
    encoded_bytes: int


async def load_image(
    source: str,
    policy: MediaPolicy,
    *,
    session: aiohttp.ClientSession | None = None,
    param: str | None = None,
) -> LoadedImage:
    """Fetch and decode one image_url under `policy`; InvalidRequest (400) says what is wrong."""
    data = await _bytes_of(source, policy, session, param)
    pixels = await asyncio.to_thread(decode_image, data, policy.limits, param=param)
    return LoadedImage(pixels, source_kind(source), len(data))


async def load_images(
    sources: Sequence[tuple[str, str | None]], policy: MediaPolicy
) -> list[LoadedImage]:
    """Load (image_url, param) pairs concurrently, in order; the first failure is raised."""
    started = time.perf_counter()
    async with contextlib.AsyncExitStack() as stack:
        session = None
        if any(source_kind(source) == "url" for source, _ in sources):
            session = await stack.enter_async_context(
                aiohttp.ClientSession(
                    # Images are compressed already; a gzip answer must not grow past the limit
                    # before the size check sees it.
                    headers={"User-Agent": "graphrt", "Accept-Encoding": "identity"},
                    auto_decompress=False,
                )
            )
        tasks = [
            asyncio.ensure_future(load_image(source, policy, session=session, param=param))
            for source, param in sources
        ]
        try:
            images = await asyncio.gather(*tasks)
        finally:
            for task in tasks:  # one failed: stop the others (downloads) before the session goes
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "loaded %d image(s) in %.1f ms: %s",
            len(images),
            (time.perf_counter() - started) * 1e3,
            ", ".join(
                f"{image.kind} {image.encoded_bytes} B -> "
                f"{image.pixels.shape[1]}x{image.pixels.shape[0]}"
                for image in images
            ),
        )
    return list(images)
