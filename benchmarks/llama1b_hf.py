"""A randomly initialised Llama of Llama-3.2-1B's shape with SmolLM2's tokenizer, as a Hugging
Face checkpoint; run by benchmarks/llama1b_fixture.py in the export venv (torch, transformers).

    python llama1b_hf.py SMOLLM2.gguf OUT_DIR SEED

The tokenizer is rebuilt from SmolLM2-135M-Instruct's GGUF (its tokens, merges, special tokens
and chat template), laid out as SmolLM2's own Hugging Face tokenizer is (byte-level BPE after
splitting digits), so that convert_hf_to_gguf.py recognises it as llama.cpp's "smollm"
pre-tokenizer and optimum-intel converts it for openvino-genai: both engines then tokenize alike.
The weights come from `torch.manual_seed(SEED)` and are saved as bf16 safetensors, so the same
seed gives the same files. Random weights: for speed comparisons only (generate with ignore_eos).

Needs `gguf` importable (the gguf-py vendored with llama.cpp, on PYTHONPATH).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# Llama-3.2-1B's shape with SmolLM2's 49,152-token vocabulary: 1.07 B parameters (tied).
SHAPE: dict[str, Any] = {
    "vocab_size": 49152,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "initializer_range": 0.02,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": True,
}
CONTROL_TOKEN = 3  # llama.cpp's token type for special tokens


def write_tokenizer(source: Path, out: Path) -> dict[str, int]:
    """tokenizer.json, tokenizer_config.json and special_tokens_map.json from the GGUF."""
    from gguf import GGUFReader

    fields = GGUFReader(str(source)).fields

    def value(name: str) -> Any:
        return fields[name].contents()

    if value("tokenizer.ggml.model") != "gpt2" or value("tokenizer.ggml.pre") != "smollm":
        raise SystemExit(f"{source} does not carry SmolLM2's tokenizer")
    tokens: list[str] = value("tokenizer.ggml.tokens")
    special = [
        i for i, kind in enumerate(value("tokenizer.ggml.token_type")) if kind == CONTROL_TOKEN
    ]
    ids = {
        role: int(value(f"tokenizer.ggml.{role}_token_id"))
        for role in ("bos", "eos", "unknown", "padding")
    }
    added = [
        {
            "id": i,
            "content": tokens[i],
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i in special
    ]
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", **byte_level},
            ],
        },
        # As SmolLM2's own tokenizer.json has them (the prefix flag does nothing in either).
        "post_processor": {
            **byte_level,
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": False,
        },
        "decoder": {**byte_level, "type": "ByteLevel", "add_prefix_space": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {token: i for i, token in enumerate(tokens)},
            "merges": [merge.split(" ") for merge in value("tokenizer.ggml.merges")],
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), "utf-8")
    names = {
        "bos_token": tokens[ids["bos"]],
        "eos_token": tokens[ids["eos"]],
        "pad_token": tokens[ids["padding"]],
        "unk_token": tokens[ids["unknown"]],
        "additional_special_tokens": [tokens[ids["bos"]], tokens[ids["eos"]]],
    }
    config = {
        **names,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(entry["id"]): {k: v for k, v in entry.items() if k != "id"} for entry in added
        },
        "chat_template": value("tokenizer.chat_template"),
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(value("llama.context_length")),
        "tokenizer_class": "PreTrainedTokenizerFast",
        "vocab_size": len(tokens),
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), "utf-8")
    (out / "special_tokens_map.json").write_text(json.dumps(names), "utf-8")
    return ids


def write_model(out: Path, seed: int, ids: dict[str, int]) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    special = {
        "bos_token_id": ids["bos"],
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["padding"],
    }
    config = LlamaConfig(**SHAPE, **special)
    config.architectures = ["LlamaForCausalLM"]
    model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    model.config.dtype = torch.bfloat16
    model.generation_config = GenerationConfig(**special, do_sample=False)
    model.save_pretrained(out, safe_serialization=True, max_shard_size="5GB")
    count = sum(parameter.numel() for parameter in model.parameters())
    print(f"random llama: {count / 1e9:.2f} B parameters, seed {seed}, saved to {out}")


def main() -> int:
    source, out, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    write_model(out, seed, write_tokenizer(source, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
