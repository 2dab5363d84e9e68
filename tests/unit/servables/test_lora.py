"""servables.llm.lora: an adapter's file, its PEFT scale, and whether the model has its layers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from servables.errors import ServableLoadError
from servables.llm.lora import (
    LoraAdapterSpec,
    check_targets,
    load_adapter,
    target_modules,
    tensor_names,
)


def peft_dir(root: Path, **config: object) -> Path:
    root.mkdir()
    save_file({"x": np.zeros(1, np.float32)}, str(root / "adapter_model.safetensors"))
    (root / "adapter_config.json").write_text(json.dumps(config))
    return root


def test_peft_scale_is_lora_alpha_over_r_times_the_given_alpha(tmp_path: Path) -> None:
    adapter = load_adapter(LoraAdapterSpec("a", peft_dir(tmp_path / "a", r=8, lora_alpha=32), 0.5))
    assert adapter.scale == 0.5 * 32 / 8
    assert adapter.weights.endswith("a/adapter_model.safetensors")


def test_rslora_scale_divides_by_the_root_of_r(tmp_path: Path) -> None:
    path = peft_dir(tmp_path / "a", r=16, lora_alpha=8, use_rslora=True)
    assert math.isclose(load_adapter(LoraAdapterSpec("a", path)).scale, 8 / 4)


def test_a_safetensors_file_inside_a_peft_dir_takes_its_config(tmp_path: Path) -> None:
    path = peft_dir(tmp_path / "a", r=4, lora_alpha=8) / "adapter_model.safetensors"
    assert load_adapter(LoraAdapterSpec("a", path)).scale == 2.0


def test_a_lone_safetensors_file_has_scale_alpha(tmp_path: Path) -> None:
    file = tmp_path / "lone.safetensors"
    save_file({"x": np.zeros(1, np.float32)}, str(file))
    assert load_adapter(LoraAdapterSpec("a", file, 0.7)).scale == pytest.approx(0.7)


def test_a_config_that_is_not_peft_is_a_load_error(tmp_path: Path) -> None:
    path = peft_dir(tmp_path / "a", rank=8)
    with pytest.raises(ServableLoadError, match=r"not a PEFT adapter_config\.json"):
        load_adapter(LoraAdapterSpec("a", path))


def test_target_modules_strip_peft_prefix_and_suffixes(tmp_path: Path) -> None:
    file = tmp_path / "t.safetensors"
    names = [
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
        "base_model.model.model.layers.1.mlp.down_proj.lora_A.default.weight",
        "lora_unet_down_blocks_0_attn1_to_q.lora_down.weight",
        "lora_unet_down_blocks_0_attn1_to_q.alpha",
        "not_a_lora_tensor",
    ]
    save_file({name: np.zeros(1, np.float32) for name in names}, str(file))
    assert sorted(tensor_names(file)) == sorted(names)
    assert target_modules(tensor_names(file)) == [
        "lora_unet_down_blocks_0_attn1_to_q",
        "model.layers.0.self_attn.q_proj",
        "model.layers.1.mlp.down_proj",
    ]


def test_a_file_that_is_not_safetensors_is_a_load_error(tmp_path: Path) -> None:
    file = tmp_path / "bad.safetensors"
    file.write_bytes(b"\xff" * 8 + b"junk")
    with pytest.raises(ServableLoadError, match="not a safetensors file"):
        tensor_names(file)


def test_check_targets_follows_genais_substring_rule() -> None:
    layers = [
        "__module.model.layers.1.self_attn.q_proj/aten::linear/MatMul",
        "model.layers.11.self_attn.q_proj",
        "lora_unet_down_blocks_0_attn1_to_q/MatMul",
    ]
    unused = check_targets(
        "a",
        ["model.layers.1.self_attn.q_proj", "model.layers.2.self_attn.q_proj"],
        layers,
    )
    assert unused == ["model.layers.2.self_attn.q_proj"]
    # genai also tries the layer name with `.` as `_`
    assert check_targets("a", ["model_layers_11_self_attn_q_proj"], layers) == []


def test_an_adapter_no_layer_takes_is_a_load_error() -> None:
    with pytest.raises(ServableLoadError, match="none of its 1 target layers"):
        check_targets("a", ["transformer.h.0.attn.c_attn"], ["model.layers.0.self_attn.q_proj"])
    with pytest.raises(ServableLoadError, match="no lora_A/lora_B tensors"):
        check_targets("a", [], ["model.layers.0.self_attn.q_proj"])
