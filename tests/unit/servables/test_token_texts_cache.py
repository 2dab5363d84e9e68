"""The token-text table is built once per detokenizer and read back after (token_texts_cache)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from servables.llm.detokenizer import TokenTexts
from servables.llm.token_texts_cache import DETOKENIZER_FILES, cached_token_texts, table_path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GRAPHRT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def tokenizer_dir(root: Path, vocabulary: bytes = b"vocabulary") -> Path:
    root.mkdir(parents=True)
    (root / DETOKENIZER_FILES[0]).write_text("<net/>", encoding="utf-8")
    (root / DETOKENIZER_FILES[1]).write_bytes(vocabulary)
    return root


class Builder:
    def __init__(self, texts: list[str | None] | None) -> None:
        self.texts = texts
        self.calls = 0

    def __call__(self) -> TokenTexts | None:
        self.calls += 1
        return TokenTexts(self.texts) if self.texts is not None else None


def test_the_table_is_built_once_and_read_back_equal(cache: Path, tmp_path: Path) -> None:
    directory = tokenizer_dir(tmp_path / "model")
    build = Builder(["a", None, " b", "", "\u00e9t\u00e9"])
    first = cached_token_texts(directory, build)
    second = cached_token_texts(directory, build)
    assert build.calls == 1
    assert first is not None and second is not None
    assert second.texts == first.texts == build.texts
    assert second.join([0, 2, 4]) == "a b\u00e9t\u00e9"


def test_a_copy_of_the_same_tokenizer_elsewhere_finds_it(cache: Path, tmp_path: Path) -> None:
    directory = tokenizer_dir(tmp_path / "model")
    build = Builder(["x", "y"])
    cached_token_texts(directory, build)
    copy = shutil.copytree(directory, tmp_path / "elsewhere")
    assert cached_token_texts(copy, build) is not None
    assert build.calls == 1


def test_another_detokenizer_builds_its_own(cache: Path, tmp_path: Path) -> None:
    build = Builder(["x", "y"])
    cached_token_texts(tokenizer_dir(tmp_path / "one", b"one"), build)
    cached_token_texts(tokenizer_dir(tmp_path / "two", b"two"), build)
    assert build.calls == 2
    assert len(list((cache / "token-texts").iterdir())) == 2


def test_a_tokenizer_that_does_not_concatenate_is_remembered(cache: Path, tmp_path: Path) -> None:
    directory = tokenizer_dir(tmp_path / "model")
    build = Builder(None)
    assert cached_token_texts(directory, build) is None
    assert cached_token_texts(directory, build) is None
    assert build.calls == 1


@pytest.mark.parametrize("content", ["{not json", '{"texts": [1, 2]}', "[]", '{"texts": "a"}'])
def test_a_damaged_table_is_rebuilt_and_replaced(cache: Path, tmp_path: Path, content: str) -> None:
    directory = tokenizer_dir(tmp_path / "model")
    path = table_path(directory)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text(content, encoding="utf-8")
    build = Builder(["a", "b"])
    table = cached_token_texts(directory, build)
    assert build.calls == 1 and table is not None and table.texts == ["a", "b"]
    assert cached_token_texts(directory, build) is not None
    assert build.calls == 1


def test_without_detokenizer_files_it_builds_every_time(cache: Path, tmp_path: Path) -> None:
    gguf = tmp_path / "model.gguf"  # the frontend given the file itself: nothing to name it by
    gguf.write_bytes(b"GGUF")
    build = Builder(["a"])
    cached_token_texts(gguf, build)
    cached_token_texts(gguf, build)
    assert build.calls == 2
    assert not cache.exists()


def test_a_cache_that_cannot_be_written_still_gives_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("GRAPHRT_CACHE", str(blocker))  # a file: no directory can be made in it
    build = Builder(["a", "b"])
    table = cached_token_texts(tokenizer_dir(tmp_path / "model"), build)
    assert table is not None and table.texts == ["a", "b"]
    assert not list(tmp_path.glob("**/*.partial"))
