"""servable_config: LLMCalculatorOptions → LLMServableConfig, option group by option group.

servable_config only maps and checks options; it does not build the LLMServable, so no engine
starts and an empty file named x.gguf is a good enough model.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from google.protobuf import text_format

from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from calculators.llm.resources import DRAFT_OPTIONS, servable_config
from servables.errors import ServableLoadError
from servables.llm.model_files import PipelineType
from servables.llm.servable import LLMServableConfig


@pytest.fixture
def graph_dir(tmp_path: Path) -> Path:
    """A graph directory holding x.gguf, and ../models/draft.gguf beside it."""
    directory = tmp_path / "graph"
    directory.mkdir()
    (directory / "x.gguf").write_bytes(b"")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "draft.gguf").write_bytes(b"")
    return directory


def options(text: str = "") -> LLMCalculatorOptions:
    """Options as a graph writes them (text format), with models_path x.gguf unless given."""
    parsed = text_format.Parse(text, LLMCalculatorOptions())
    if not parsed.HasField("models_path"):
        parsed.models_path = "x.gguf"
    return parsed


def config(graph_dir: Path, text: str = "", name: str = "llm") -> LLMServableConfig:
    return servable_config(options(text), graph_dir, name)


def load_error(graph_dir: Path, text: str) -> ServableLoadError:
    with pytest.raises(ServableLoadError) as info:
        config(graph_dir, text)
    return info.value


# ------------------------------------------------------------------------------------- defaults


def test_defaults(graph_dir: Path) -> None:
    result = config(graph_dir, name="smol")
    assert result == LLMServableConfig(
        name="smol",
        models_path=(graph_dir / "x.gguf").resolve(),
        device="CPU",
        pipeline_type=PipelineType.AUTO,
        properties={},
        scheduler={
            "cache_size": 0,
            "max_num_batched_tokens": 256,
            "max_num_seqs": 256,
            "dynamic_split_fuse": True,
            "enable_prefix_caching": False,
        },
        draft=None,
        max_tokens_limit=None,
        best_of_limit=20,
        log_level=logging.INFO,
    )


def test_name_and_log_level(graph_dir: Path) -> None:
    result = servable_config(options(), graph_dir, "named", logging.DEBUG)
    assert (result.name, result.log_level) == ("named", logging.DEBUG)


def test_device(graph_dir: Path) -> None:
    assert config(graph_dir, 'device: "GPU.1"').device == "GPU.1"
    assert config(graph_dir, 'device: ""').device == "CPU"


# ------------------------------------------------------------------------------------ models_path


def test_models_path_is_required(graph_dir: Path) -> None:
    with pytest.raises(ServableLoadError) as info:
        servable_config(LLMCalculatorOptions(), graph_dir, "llm")
    assert info.value.message == "LLMCalculatorOptions.models_path is required"
    assert info.value.param == "models_path"


def test_relative_models_path_is_resolved_against_the_graph_dir(
    graph_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory must not matter
    assert config(graph_dir, 'models_path: "./x.gguf"').models_path == graph_dir / "x.gguf"
    result = config(graph_dir, 'models_path: "../models/draft.gguf"')
    assert result.models_path == (tmp_path / "models" / "draft.gguf").resolve()
    assert config(graph_dir, 'models_path: "./"').models_path == graph_dir.resolve()


def test_absolute_models_path(graph_dir: Path, tmp_path: Path) -> None:
    model = tmp_path / "models" / "draft.gguf"
    assert config(tmp_path / "nowhere", f'models_path: "{model}"').models_path == model.resolve()


def test_missing_models_path(graph_dir: Path) -> None:
    error = load_error(graph_dir, 'models_path: "absent.gguf"')
    missing = graph_dir.resolve() / "absent.gguf"
    assert error.message == f"LLM node models_path: {missing} does not exist"
    assert error.param == "models_path"


def test_empty_models_path(graph_dir: Path) -> None:
    error = load_error(graph_dir, 'models_path: ""')
    assert (error.message, error.param) == ("LLM node models_path is empty", "models_path")


# ------------------------------------------------------------------------------------- scheduler


def test_scheduler_fields(graph_dir: Path) -> None:
    result = config(
        graph_dir,
        "cache_size: 4 max_num_batched_tokens: 1024 max_num_seqs: 8 dynamic_split_fuse: false "
        "enable_prefix_caching: true cache_interval_multiplier: 3",
    )
    assert result.scheduler == {
        "cache_size": 4,
        "max_num_batched_tokens": 1024,
        "max_num_seqs": 8,
        "dynamic_split_fuse": False,
        "enable_prefix_caching": True,
        "cache_interval_multiplier": 3,
    }


def test_cache_interval_multiplier_only_when_set(graph_dir: Path) -> None:
    assert "cache_interval_multiplier" not in config(graph_dir).scheduler
    assert (
        config(graph_dir, "cache_interval_multiplier: 0").scheduler["cache_interval_multiplier"]
        == 0
    )


def test_cache_eviction_config(graph_dir: Path) -> None:
    result = config(
        graph_dir, "cache_eviction_config { start_size: 32 recent_size: 128 max_cache_size: 672 }"
    )
    assert result.scheduler["cache_eviction_config"] == {
        "aggregation_mode": "NORM_SUM",
        "start_size": 32,
        "recent_size": 128,
        "max_cache_size": 672,
        "apply_rotation": False,
        "snapkv_window_size": 8,
    }
    result = config(
        graph_dir,
        "cache_eviction_config { aggregation_mode: SUM start_size: 1 recent_size: 2 "
        "max_cache_size: 3 apply_rotation: true snapkv_window_size: 16 }",
    )
    assert result.scheduler["cache_eviction_config"] == {
        "aggregation_mode": "SUM",
        "start_size": 1,
        "recent_size": 2,
        "max_cache_size": 3,
        "apply_rotation": True,
        "snapkv_window_size": 16,
    }


def test_cache_eviction_kv_crush_config(graph_dir: Path) -> None:
    """KVCrush (openvino-genai's choice of evicted blocks to keep) was parsed and dropped."""
    sizes = "start_size: 32 recent_size: 128 max_cache_size: 672"
    result = config(
        graph_dir,
        f"cache_eviction_config {{ {sizes} kv_crush_config {{ budget: 4 anchor_point_mode: MEAN "
        "rng_seed: 7 } }",
    )
    assert result.scheduler["cache_eviction_config"]["kvcrush_config"] == {
        "budget": 4,
        "anchor_point_mode": "MEAN",
        "rng_seed": 7,
    }
    defaults = config(graph_dir, f"cache_eviction_config {{ {sizes} kv_crush_config {{ }} }}")
    assert defaults.scheduler["cache_eviction_config"]["kvcrush_config"] == {
        "budget": 0,
        "anchor_point_mode": "RANDOM",
        "rng_seed": 0,
    }
    without = config(graph_dir, f"cache_eviction_config {{ {sizes} }}")
    assert "kvcrush_config" not in without.scheduler["cache_eviction_config"]


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ("", "start_size"),
        ("start_size: 1", "recent_size"),
        ("start_size: 1 recent_size: 2", "max_cache_size"),
        ("recent_size: 2 max_cache_size: 3", "start_size"),
        ("start_size: 0 max_cache_size: 3", "recent_size"),
    ],
)
def test_cache_eviction_config_required_fields(graph_dir: Path, given: str, missing: str) -> None:
    error = load_error(graph_dir, f"cache_eviction_config {{ {given} }}")
    assert error.message == f"cache_eviction_config.{missing} is required"
    assert error.param == "cache_eviction_config"


def test_sparse_attention_config(graph_dir: Path) -> None:
    assert "sparse_attention_config" not in config(graph_dir).scheduler
    result = config(graph_dir, "sparse_attention_config {}")
    assert result.scheduler["sparse_attention_config"] == {"mode": "TRISHAPE"}
    result = config(
        graph_dir,
        "sparse_attention_config { mode: XATTENTION num_last_dense_tokens_in_prefill: 100 "
        "num_retained_start_tokens_in_cache: 128 num_retained_recent_tokens_in_cache: 1920 "
        "xattention_threshold: 0.75 xattention_block_size: 64 xattention_stride: 8 }",
    )
    assert result.scheduler["sparse_attention_config"] == {
        "mode": "XATTENTION",
        "num_last_dense_tokens_in_prefill": 100,
        "num_retained_start_tokens_in_cache": 128,
        "num_retained_recent_tokens_in_cache": 1920,
        "xattention_threshold": 0.75,
        "xattention_block_size": 64,
        "xattention_stride": 8,
    }


# --------------------------------------------------------------------------------- plugin_config


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ("{}", {}),
        (
            '{"KV_CACHE_PRECISION": "u8", "NUM_STREAMS": 2}',
            {"KV_CACHE_PRECISION": "u8", "NUM_STREAMS": 2},
        ),
        (
            '{"prompt_lookup": true, "nested": {"a": [1]}}',
            {"prompt_lookup": True, "nested": {"a": [1]}},
        ),
    ],
)
def test_plugin_config(graph_dir: Path, text: str, expected: dict[str, object]) -> None:
    result = servable_config(options(f"plugin_config: '{text}'"), graph_dir, "llm")
    assert result.properties == expected


@pytest.mark.parametrize("text", ["{", "{KV_CACHE_PRECISION: u8}", "nope", '{"a": 1,}'])
def test_plugin_config_invalid_json(graph_dir: Path, text: str) -> None:
    error = load_error(graph_dir, f"plugin_config: '{text}'")
    assert error.message.startswith("plugin_config is not valid JSON: ")
    assert len(error.message) > len("plugin_config is not valid JSON: ")
    assert error.param == "plugin_config"


@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "3", "null", "true"])
def test_plugin_config_not_an_object(graph_dir: Path, text: str) -> None:
    error = load_error(graph_dir, f"plugin_config: '{text}'")
    assert error.message == "plugin_config must be a JSON object"
    assert error.param == "plugin_config"


# --------------------------------------------------------------------------------- pipeline_type


@pytest.mark.parametrize("name", ["LM", "VLM", "LM_CB", "VLM_CB", "OMNI", "AUTO"])
def test_pipeline_type(graph_dir: Path, name: str) -> None:
    # Only mapped here; whether the files fit is checked when the servable is built.
    assert config(graph_dir, f"pipeline_type: {name}").pipeline_type is PipelineType[name]


def test_every_proto_pipeline_type_has_a_servable_type() -> None:
    for name in LLMCalculatorOptions.PipelineType.keys():  # noqa: SIM118
        assert PipelineType[name].value == name


# ------------------------------------------------------------------------------ limits


def test_max_tokens_limit(graph_dir: Path) -> None:
    assert config(graph_dir).max_tokens_limit is None
    assert config(graph_dir, "max_tokens_limit: 4096").max_tokens_limit == 4096
    assert config(graph_dir, "max_tokens_limit: 0").max_tokens_limit == 0  # set, even if 0


def test_best_of_limit(graph_dir: Path) -> None:
    assert config(graph_dir).best_of_limit == 20
    assert config(graph_dir, "best_of_limit: 4").best_of_limit == 4


# --------------------------------------------------------------------------------- draft model


def test_draft_defaults_to_main_model_settings(graph_dir: Path, tmp_path: Path) -> None:
    result = config(
        graph_dir,
        'device: "GPU" cache_size: 2 max_num_batched_tokens: 512 max_num_seqs: 16 '
        'dynamic_split_fuse: false draft_models_path: "../models/draft.gguf"',
    )
    assert result.draft == {
        "models_path": str((tmp_path / "models" / "draft.gguf").resolve()),
        "device": "GPU",
        "scheduler": {
            "cache_size": 2,
            "max_num_batched_tokens": 512,
            "max_num_seqs": 16,
            "dynamic_split_fuse": False,
        },
    }


def test_draft_settings_override(graph_dir: Path) -> None:
    result = config(
        graph_dir,
        'device: "GPU" draft_models_path: "x.gguf" draft_device: "CPU" draft_cache_size: 1 '
        "draft_max_num_batched_tokens: 64 draft_max_num_seqs: 4 draft_dynamic_split_fuse: true "
        "dynamic_split_fuse: false",
    )
    assert result.draft == {
        "models_path": str((graph_dir / "x.gguf").resolve()),
        "device": "CPU",
        "scheduler": {
            "cache_size": 1,
            "max_num_batched_tokens": 64,
            "max_num_seqs": 4,
            "dynamic_split_fuse": True,
        },
    }


def test_draft_device_defaults_to_cpu_with_main(graph_dir: Path) -> None:
    result = config(graph_dir, 'draft_models_path: "x.gguf"')
    assert result.draft is not None
    assert result.draft["device"] == "CPU"


@pytest.mark.parametrize("option", DRAFT_OPTIONS)
def test_draft_option_without_draft_models_path(graph_dir: Path, option: str) -> None:
    value = (
        '"CPU"'
        if option == "draft_device"
        else ("true" if option.endswith(("split_fuse", "eagle3_mode")) else "1")
    )
    error = load_error(graph_dir, f"{option}: {value}")
    assert error.message == f"{option} need draft_models_path to be set"
    assert error.param == option


def test_draft_options_without_draft_models_path_are_all_named(graph_dir: Path) -> None:
    error = load_error(graph_dir, 'draft_max_num_seqs: 2 draft_device: "GPU"')
    assert error.message == "draft_device, draft_max_num_seqs need draft_models_path to be set"
    assert error.param == "draft_device"


def test_draft_eagle3_mode_is_refused(graph_dir: Path) -> None:
    error = load_error(graph_dir, 'draft_models_path: "x.gguf" draft_eagle3_mode: true')
    assert error.message == "draft_eagle3_mode is not supported by graphrt yet"
    assert error.param == "draft_eagle3_mode"
    assert config(graph_dir, 'draft_models_path: "x.gguf" draft_eagle3_mode: false').draft


def test_missing_draft_models_path_names_the_draft_field(graph_dir: Path) -> None:
    # Expected behaviour: the error names draft_models_path, not the (valid) main models_path.
    error = load_error(graph_dir, 'draft_models_path: "absent.gguf"')
    assert str(graph_dir.resolve() / "absent.gguf") in error.message
    assert error.param == "draft_models_path"


# ------------------------------------------------------------------------- chat_template_mode


@pytest.mark.parametrize(("given", "mode"), [("", None), ("JINJA", "JINJA"), ("MINJA", "MINJA")])
def test_chat_template_mode_reaches_the_servable(
    graph_dir: Path, given: str, mode: str | None
) -> None:
    text = f"chat_template_mode: {given}" if given else ""
    assert servable_config(options(text), graph_dir, "smol").chat_template_mode == mode


def test_parser_options_reach_the_servable(graph_dir: Path) -> None:
    text = 'tool_parser: "hermes3" reasoning_parser: "qwen3" enable_tool_guided_generation: true'
    result = servable_config(options(text), graph_dir, "smol")
    assert (result.tool_parser, result.reasoning_parser) == ("hermes3", "qwen3")
    assert result.enable_tool_guided_generation is True
    unset = config(graph_dir)
    assert (unset.tool_parser, unset.reasoning_parser) == (None, None)  # detected at load
    off = servable_config(options('tool_parser: "none"'), graph_dir, "smol")
    assert off.tool_parser == "none"


def test_unknown_parser_name_fails_the_load(graph_dir: Path) -> None:
    error = load_error(graph_dir, 'tool_parser: "hermes4"')
    assert "hermes4" in error.message and "hermes3" in error.message
    assert error.param == "tool_parser"


def test_no_warning_for_unset_unimplemented_options(
    graph_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="calculators.llm.resources"):
        config(graph_dir)
    assert not caplog.records


# ------------------------------------------------------------------------------ lora_adapters


def write_peft(directory: Path, r: int = 8, lora_alpha: int = 16) -> Path:
    directory.mkdir(parents=True)
    (directory / "adapter_model.safetensors").write_bytes(b"")
    (directory / "adapter_config.json").write_text(f'{{"r": {r}, "lora_alpha": {lora_alpha}}}')
    return directory


def test_lora_adapters_are_found_beside_the_graph_with_peft_scale(graph_dir: Path) -> None:
    write_peft(graph_dir / "loras" / "poet")
    (graph_dir / "plain.safetensors").write_bytes(b"")
    config = servable_config(
        options(
            'lora_adapters { alias: "poet" path: "loras/poet" alpha: 0.5 } '
            'lora_adapters { alias: "plain" path: "plain.safetensors" }'
        ),
        graph_dir,
        "base",
    )
    poet, plain = config.adapters
    assert (poet.alias, poet.scale) == ("poet", 0.5 * 16 / 8)
    assert poet.weights == str((graph_dir / "loras/poet/adapter_model.safetensors").resolve())
    assert (plain.alias, plain.scale) == ("plain", 1.0)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ('{ alias: "a" path: "missing" }', "missing does not exist"),
        ('{ alias: "base" path: "x.gguf" }', "is the base model's name"),
        ('{ alias: "a b" path: "x.gguf" }', "must be a model name"),
        ('{ alias: "a" path: "x.gguf" }', "neither a PEFT directory nor a .safetensors"),
        ('{ alias: "a" path: "empty" }', "has no adapter_model.safetensors"),
    ],
)
def test_bad_lora_adapters_fail_the_load_naming_the_option(
    graph_dir: Path, entries: str, message: str
) -> None:
    (graph_dir / "empty").mkdir()
    with pytest.raises(ServableLoadError, match=message) as raised:
        servable_config(options(f"lora_adapters {entries}"), graph_dir, "base")
    assert raised.value.param == "lora_adapters"


def test_a_lora_alias_given_twice_fails_the_load(graph_dir: Path) -> None:
    (graph_dir / "a.safetensors").write_bytes(b"")
    entry = 'lora_adapters { alias: "a" path: "a.safetensors" } '
    with pytest.raises(ServableLoadError, match="'a' is used twice"):
        servable_config(options(entry * 2), graph_dir, "base")


def test_gguf_weights_default_to_the_files_own(graph_dir: Path) -> None:
    assert config(graph_dir).gguf_weights == "genai"


@pytest.mark.parametrize("name", ["INT4_CHANNELWISE", "INT8_CHANNELWISE"])
def test_gguf_weights_layout_reaches_the_servable(graph_dir: Path, name: str) -> None:
    assert config(graph_dir, f"gguf_weights: {name}").gguf_weights == name.lower()


def test_gguf_weights_need_a_gguf(graph_dir: Path) -> None:
    (graph_dir / "ir").mkdir()
    error = load_error(graph_dir, 'models_path: "ir" gguf_weights: INT4_CHANNELWISE')
    assert error.param == "gguf_weights"
    assert "applies to a .gguf models_path" in error.message


def test_gguf_weights_and_lora_adapters_are_refused_together(graph_dir: Path) -> None:
    text = 'gguf_weights: INT8_CHANNELWISE lora_adapters { alias: "a" path: "adapter" }'
    error = load_error(graph_dir, text)
    assert error.param == "gguf_weights"
    assert "lora_adapters" in error.message
