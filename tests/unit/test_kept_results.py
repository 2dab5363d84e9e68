"""KeptResults (tests/conftest.py): a reference result is computed once, and again whenever
anything that decides it changes, never read back for a different question."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import KeptResults


class Reference:
    """Stands for a reference pipeline: counts what it computes."""

    def __init__(self) -> None:
        self.computed: list[object] = []

    def answer(self, call: object) -> str:
        self.computed.append(call)
        return f"answer {len(self.computed)}"


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GRAPHRT_TEST_CACHE", str(tmp_path))
    return tmp_path


def test_a_result_is_computed_once_and_kept_across_sessions(tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"weights")
    reference = Reference()
    first = KeptResults(Reference, model).get(["chat", "hi", 5], lambda: reference.answer(1))
    again = KeptResults(Reference, model).get(["chat", "hi", 5], lambda: reference.answer(2))
    assert first == again == "answer 1" and reference.computed == [1]
    assert len(list((tmp_path / "references").glob("*.pickle"))) == 1


def test_another_call_model_or_array_computes_again(tmp_path: Path) -> None:
    model = tmp_path / "model.bin"
    model.write_bytes(b"weights")
    reference = Reference()
    kept = KeptResults(Reference, model)
    pixels = np.zeros((2, 2, 3), np.uint8)
    kept.get(["images", pixels], lambda: reference.answer("zeros"))
    kept.get(["images", pixels + 1], lambda: reference.answer("ones"))
    kept.get(["images", pixels], lambda: reference.answer("zeros again"))
    kept.get(["chat", "hi", 6], lambda: reference.answer("six tokens"))
    other_model = tmp_path / "other.bin"
    other_model.write_bytes(b"other weights")
    KeptResults(Reference, other_model).get(["chat", "hi", 6], lambda: reference.answer("other"))
    assert reference.computed == ["zeros", "ones", "six tokens", "other"]


def test_the_owners_code_is_part_of_the_key() -> None:
    def first_version() -> str:
        return "old"

    def second_version() -> str:
        return "new"

    assert KeptResults(first_version).get(["q"], first_version) == "old"
    assert KeptResults(second_version).get(["q"], second_version) == "new"
