"""Servable-level image rules that no e2e test can reach here (there is no NPU on CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servables.errors import InvalidRequest
from servables.llm.engine_requests import MAX_IMAGES_PER_REQUEST, check_image_count
from servables.llm.model_files import PipelineType
from servables.llm.servable import LLMServable, LLMServableConfig

TINY_VLM = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "tiny-qwen2-vl"


def test_a_vlm_directory_on_npu_is_the_stateful_vlm_servable() -> None:
    servable = LLMServable(LLMServableConfig(name="v", models_path=TINY_VLM, device="NPU"))
    assert servable.kind is PipelineType.VLM  # built, not started: no engine process


@pytest.mark.parametrize("count", [0, 2, 3])
def test_npu_vlm_takes_exactly_one_image(count: int) -> None:
    with pytest.raises(InvalidRequest) as caught:
        check_image_count(PipelineType.VLM, "NPU", count)
    assert caught.value.message == (
        f"VLM servables on NPU accept exactly one image per request, but {count} were provided"
    )
    assert caught.value.param == "messages"


def test_a_request_carries_a_bounded_number_of_images() -> None:
    check_image_count(PipelineType.VLM_CB, "CPU", MAX_IMAGES_PER_REQUEST)
    with pytest.raises(InvalidRequest) as caught:
        check_image_count(PipelineType.VLM_CB, "CPU", MAX_IMAGES_PER_REQUEST + 1)
    assert caught.value.message == (
        f"A request may carry at most {MAX_IMAGES_PER_REQUEST} images, but "
        f"{MAX_IMAGES_PER_REQUEST + 1} were provided"
    )


@pytest.mark.parametrize(
    ("kind", "device", "count"),
    [
        (PipelineType.VLM, "NPU", 1),
        (PipelineType.VLM, "CPU", 0),
        (PipelineType.VLM, "CPU", 3),
        (PipelineType.VLM_CB, "GPU", 2),
    ],
)
def test_other_image_counts_are_fine(kind: PipelineType, device: str, count: int) -> None:
    check_image_count(kind, device, count)
