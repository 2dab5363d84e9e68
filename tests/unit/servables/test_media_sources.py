"""load_image's policy: data URLs, local paths under the allowed folder, URLs of allowed hosts.

Downloads themselves (timeouts, size caps, redirects) run against a real HTTP server in
tests/e2e/test_vlm.py; here everything that is decided before any byte is fetched.
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from servables.errors import InvalidRequest
from servables.io.images.images import ImageLimits
from servables.io.images.sources import MediaPolicy, load_image, load_images, source_kind

PIXELS = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)


def png() -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(PIXELS).save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes, header: str = "data:image/png;base64,") -> str:
    return header + base64.b64encode(data).decode()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    allowed = tmp_path / "allowed"
    (allowed / "sub").mkdir(parents=True)
    (allowed / "pic.png").write_bytes(png())
    (allowed / "sub" / "deep.png").write_bytes(png())
    (tmp_path / "secret.png").write_bytes(png())
    (allowed / "out.png").symlink_to(tmp_path / "secret.png")
    (allowed / "in.png").symlink_to(allowed / "pic.png")
    return allowed


def policy(folder: Path | None = None, domains: list[str] | None = None) -> MediaPolicy:
    return MediaPolicy.from_flags(str(folder) if folder else None, domains)


async def refused(source: str, media: MediaPolicy) -> str:
    with pytest.raises(InvalidRequest) as caught:
        await load_image(source, media, param="p")
    assert caught.value.param == "p"
    return caught.value.message


# -------------------------------------------------------------------------------- data URLs


@pytest.mark.parametrize(
    "transform",
    [
        lambda url: url,
        lambda url: url.rstrip("="),  # missing padding (OVMS accepts it)
        lambda url: url[:40] + "\n" + url[40:],  # line-wrapped
        lambda url: url.replace("data:image/png", "data:image/jpeg"),  # the type is not trusted
    ],
    ids=["plain", "no-padding", "wrapped", "wrong-type"],
)
async def test_data_url(transform: Any) -> None:
    image = await load_image(transform(data_url(png())), MediaPolicy())
    assert np.array_equal(image.pixels, PIXELS)
    assert image.kind == "data"


async def test_invalid_base64() -> None:
    message = await refused("data:image/png;base64,abc$def", MediaPolicy())
    assert message == "Invalid base64 string in request"


async def test_data_url_must_be_base64() -> None:
    message = await refused("data:image/png,abc", MediaPolicy())
    assert message.startswith("Image data URLs must be base64 encoded")


async def test_data_url_size_cap_before_decoding() -> None:
    media = MediaPolicy(limits=ImageLimits(max_bytes=10))
    message = await refused(data_url(png()), media)
    assert message == "Image is larger than the limit of 10 bytes"


# ------------------------------------------------------------------------------- local paths


async def test_local_files_off_by_default() -> None:
    message = await refused("/etc/hostname", MediaPolicy())
    assert message == "Loading images from local filesystem is disabled."


@pytest.mark.parametrize(
    "source", ["pic.png", "sub/deep.png", "sub/../pic.png", "in.png", "{folder}/pic.png"]
)
async def test_paths_inside_the_folder(folder: Path, source: str) -> None:
    image = await load_image(source.format(folder=folder), policy(folder))
    assert np.array_equal(image.pixels, PIXELS)
    assert image.kind == "path"


async def test_file_url(folder: Path) -> None:
    image = await load_image((folder / "pic.png").as_uri(), policy(folder))
    assert image.kind == "path"


@pytest.mark.parametrize(
    "source", ["../secret.png", "{folder}/../secret.png", "{root}/secret.png", "out.png", "/etc"]
)
async def test_paths_that_escape_the_folder(folder: Path, source: str) -> None:
    source = source.format(folder=folder, root=folder.parent)
    message = await refused(source, policy(folder))
    assert message == "Given filepath is not subpath of allowed_local_media_path"


async def test_a_folder_named_like_the_allowed_one_is_outside(folder: Path) -> None:
    twin = folder.parent / (folder.name + "-twin")
    twin.mkdir()
    (twin / "pic.png").write_bytes(png())
    message = await refused(str(twin / "pic.png"), policy(folder))
    assert message == "Given filepath is not subpath of allowed_local_media_path"


async def test_missing_file_and_folder(folder: Path) -> None:
    missing = await refused("nope.png", policy(folder))
    assert missing == (
        "Image file parsing failed: nope.png does not exist under allowed_local_media_path"
    )
    directory = await refused("sub", policy(folder))
    assert directory == "Image file parsing failed: sub is not a regular file"


async def test_fifo_is_not_read(folder: Path) -> None:
    os.mkfifo(folder / "pipe.png")
    message = await refused("pipe.png", policy(folder))
    assert message == "Image file parsing failed: pipe.png is not a regular file"


async def test_nul_byte_in_path(folder: Path) -> None:
    message = await refused("pic\0.png", policy(folder))
    assert message == "Image file parsing failed: invalid path"


async def test_file_size_cap(folder: Path) -> None:
    media = MediaPolicy(folder.resolve(), limits=ImageLimits(max_bytes=10))
    assert await refused("pic.png", media) == "Image is larger than the limit of 10 bytes"


def test_allowed_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        policy(tmp_path / "missing")


# -------------------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(
    ("domains", "url"),
    [
        (None, "http://example.com/a.png"),
        (["example.org"], "http://example.com/a.png"),
        (["example.com"], "http://sub.example.com/a.png"),
        (["example.com"], "http:///a.png"),
    ],
)
async def test_hosts_not_allowed(domains: list[str] | None, url: str) -> None:
    message = await refused(url, policy(None, domains))
    assert message == "Given url does not match any allowed domain from allowed_media_domains"


async def test_unsupported_scheme() -> None:
    message = await refused("ftp://example.com/a.png", policy(None, ["all"]))
    assert message.startswith("Unsupported image URL scheme 'ftp'")


def test_allowed_hosts() -> None:
    media = policy(None, [" Example.COM ", "127.0.0.1"])
    assert media.allows_host("example.com") and media.allows_host("127.0.0.1")
    assert not media.allows_host("localhost")
    assert policy(None, ["all"]).allows_host("anything.example")
    assert not MediaPolicy().allows_host("example.com")


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("data:image/png;base64,AA", "data"),
        ("https://a/b.png", "url"),
        ("HTTP://a/b.png", "url"),
        ("ftp://a/b", "url"),
        ("file:///tmp/a.png", "path"),
        ("/tmp/a.png", "path"),
        ("a.png", "path"),
        ("C:\\a.png", "path"),
    ],
)
def test_source_kind(source: str, kind: str) -> None:
    assert source_kind(source) == kind


async def test_load_images_keeps_order_and_fails_as_a_whole(folder: Path) -> None:
    media = policy(folder)
    good = [("pic.png", "a"), (data_url(png()), "b")]
    images = await load_images(good, media)
    assert [image.kind for image in images] == ["path", "data"]
    with pytest.raises(InvalidRequest) as caught:
        await load_images([*good, ("../secret.png", "c")], media)
    assert caught.value.param == "c"


@pytest.mark.parametrize("url", ["http://[", "https://[foo]/x.png"])
async def test_a_malformed_url_is_refused_before_any_domain_check(url: str) -> None:
    message = await refused(url, MediaPolicy())
    assert message.startswith("Invalid image URL:")
