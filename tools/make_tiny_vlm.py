"""Build (and check) a tiny, randomly initialised Qwen2-VL model in OpenVINO IR for offline tests.

    bash tools/setup_vlm_export_venv.sh /work/vlmvenv                  # once: torch + optimum-intel
    /work/vlmvenv/bin/python tools/make_tiny_vlm.py tests/fixtures/models/tiny-qwen2-vl --verify
    python tools/make_tiny_vlm.py DIR --verify-only                     # only openvino-genai needed

The output (~0.8 MB) is committed under tests/fixtures/models/tiny-qwen2-vl/, so tests and CI need
only openvino-genai; this script is how to rebuild it (e.g. when a future openvino-tokenizers
refuses the committed tokenizer IR). A rebuild is byte-identical: everything is seeded and no
path, time or temp name ends up in the files.

It stays one file although it is long: it is a self-contained fixture builder, run by path in
a separate export venv, importing nothing from this project and only the standard library at top
level, so it can be read, copied and rerun on its own.

Why each non-obvious step exists:

* Qwen2-VL, not another VLM: openvino.genai's own tests use a tiny random qwen2_vl with
  transformers 5.0.0; its image preprocessing is self-contained C++ in genai (smart resize to
  multiples of 28, 14-px patches, temporal patch 2, 2x2 merge) and needs no remote code. Other
  optimum-intel VLM exporters are capped at older transformers or marked failing with 5.x.
* Our own tokenizer: there is no hub access, so a byte-level BPE is trained here with `tokenizers`
  on a small inline corpus (it stops well short of the requested size; that is fine). Qwen2's
  pre-tokenizer regex is used so openvino-tokenizers converts it exactly as for real Qwen models.
  Qwen2-VL's 14 special tokens are then appended *in Qwen2-VL's order*, so ids keep the same
  relative layout (<|endoftext|>, <|im_start|>, <|im_end|>, ..., <|vision_start|>,
  <|vision_end|>, <|vision_pad|>, <|image_pad|>, <|video_pad|>); config.json's image/video/vision
  token ids point at them, and genai finds them by name when it expands image placeholders.
* Qwen2-VL's official chat template (written out below) is put in tokenizer_config.json,
  chat_template.jinja and chat_template.json: openvino-tokenizers copies it into the rt_info of
  openvino_tokenizer.xml (what genai uses), and servers that read tokenizer_config.json see it too.
* Sizes: text hidden 64, 2 layers, 4 heads / 2 KV heads (head_dim 16), so mrope_section must sum
  to head_dim / 2 = 8 -> [2, 3, 3]. The vision tower's output (`hidden_size`) must equal the text
  hidden size. min_pixels 3136 / max_pixels 12544 keep an image at 4..16 vision tokens, so prompts
  stay short and fast.
* lm_head shaping: a raw random head emits control bytes, lone UTF-8 continuation bytes and
  sometimes EOS. Rows of special tokens and of tokens that do not decode to printable ASCII are
  zeroed; printable rows get std 0.6 (logits std ~5 after the final RMSNorm). Hence outputs are
  printable ASCII, EOS is never generated (every request runs exactly max_new_tokens) and greedy
  decoding is stable. Tests that need natural stopping must use stop strings or another model.
* The export goes through `optimum-cli export openvino --task image-text-to-text
  --weight-format fp16` with HF_HUB_OFFLINE=1 (nothing may be downloaded). The export venv has
  no Pillow, so AutoProcessor cannot load and optimum silently writes *no*
  preprocessor_config.json; and transformers 5 re-saves tokenizer_config.json without the chat
  template (it moves it to chat_template.jinja). So afterwards our own preprocessor_config.json
  (with the top-level min_pixels/max_pixels/merge_size/temporal_patch_size keys genai reads),
  tokenizer.json, tokenizer_config.json (with chat_template) and chat_template.json are copied in,
  and only the files listed in OUTPUT_FILES are kept.
* The source checkpoint is written to a temp dir under a fixed name, and the IR rt_info is
  checked for that name: nothing host- or run-specific may leak into the committed files.
* verify() imports only openvino, openvino_genai and numpy, so CI (no torch) can run it against
  the committed directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SEED = 0
HEAD_SEED = 1

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Qwen2's pre-tokenizer split pattern (contractions, letters, single digits, punctuation runs,
# newlines, whitespace).
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Qwen2-VL-*-Instruct's chat template, as published in its tokenizer_config.json.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

CORPUS = [
    "The capital of France is Paris. The capital of Italy is Rome.",
    "Describe the picture: a red square on a blue background, with a small green circle.",
    "What is in this image? I see a cat sitting on a wooden table next to a cup of coffee.",
    "You are a helpful assistant. Answer the question about the image in one short sentence.",
    "Tell me a story about a robot who learns to paint pictures of the sea.",
    "Count the objects: one apple, two bananas, three oranges, 4 pears and 5 plums.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))  # prints 5",
    'JSON example: {"name": "tiny", "layers": 2, "hidden": 64, "ok": true}',
    "Left, right, up, down; north, south, east, west. Colors: red, green, blue, yellow.",
    "Quick brown fox jumps over the lazy dog! Is it? Yes - it's the dog's day, isn't it?",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and symbols ~ ` @ # $ % ^ & * ( ) [ ] < > | \\ / = +",
]

TEXT_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "use_sliding_window": False,
    "rope_parameters": {
        "rope_type": "default",
        "rope_theta": 1000000.0,
        "mrope_section": [2, 3, 3],
    },
}

VISION_CONFIG: dict[str, Any] = {
    "depth": 2,
    "embed_dim": 32,
    "hidden_size": 64,  # merger output; must equal TEXT_CONFIG["hidden_size"]
    "hidden_act": "quick_gelu",
    "mlp_ratio": 2,
    "num_heads": 2,
    "in_channels": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
}

MIN_PIXELS = 3136  # 56 * 56 -> at least 4 vision tokens per image
MAX_PIXELS = 12544  # 112 * 112 -> at most 16 vision tokens per image
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]

# What genai reads for qwen2_vl (processor_config.cpp) plus what transformers needs to load it.
PREPROCESSOR_CONFIG: dict[str, Any] = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2VLProcessor",
    "do_convert_rgb": True,
    "do_normalize": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": CLIP_MEAN,
    "image_std": CLIP_STD,
    "max_pixels": MAX_PIXELS,
    "merge_size": 2,
    "min_pixels": MIN_PIXELS,
    "patch_size": 14,
    "resample": 3,
    "rescale_factor": 1 / 255,
    "size": {"longest_edge": MAX_PIXELS, "shortest_edge": MIN_PIXELS},
    "temporal_patch_size": 2,
}

# Files the fixture keeps; anything else the exporter writes is dropped.
OUTPUT_FILES = [
    "chat_template.jinja",
    "chat_template.json",
    "config.json",
    "generation_config.json",
    "openvino_detokenizer.bin",
    "openvino_detokenizer.xml",
    "openvino_language_model.bin",
    "openvino_language_model.xml",
    "openvino_text_embeddings_model.bin",
    "openvino_text_embeddings_model.xml",
    "openvino_tokenizer.bin",
    "openvino_tokenizer.xml",
    "openvino_vision_embeddings_merger_model.bin",
    "openvino_vision_embeddings_merger_model.xml",
    "openvino_vision_embeddings_model.bin",
    "openvino_vision_embeddings_model.xml",
    "preprocessor_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
]

SRC_DIRNAME = "tiny-qwen2-vl-src"  # fixed, so no random temp name can reach the output


def log(msg: str) -> None:
    print(msg, flush=True)


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Build (needs the export venv: torch, transformers 5.0.0, tokenizers, optimum-intel)
# --------------------------------------------------------------------------------------------


def train_tokenizer() -> Any:
    """Byte-level BPE in Qwen2's layout, followed by Qwen2-VL's special tokens."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=False
    )
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    n_regular = tok.get_vocab_size()
    tok.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False, lstrip=False, rstrip=False)
            for t in SPECIAL_TOKENS
        ]
    )
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    if ids != list(range(n_regular, n_regular + len(SPECIAL_TOKENS))):
        raise RuntimeError(f"special tokens got unexpected ids {ids}")
    return tok


def special_id(tok: Any, token: str) -> int:
    value = tok.token_to_id(token)
    if value is None:
        raise RuntimeError(f"{token} missing from the tokenizer")
    return int(value)


def tokenizer_config(tok: Any) -> dict[str, Any]:
    decoder = {
        str(special_id(tok, t)): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for t in SPECIAL_TOKENS
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": SPECIAL_TOKENS[2:],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 4096,
        "pad_token": "<|endoftext|>",
        "padding_side": "left",
        "processor_class": "Qwen2VLProcessor",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def special_tokens_map() -> dict[str, Any]:
    return {
        "additional_special_tokens": SPECIAL_TOKENS[2:],
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }


def printable_token_ids(tok: Any) -> list[int]:
    """Regular tokens whose text is non-empty printable ASCII on its own."""
    specials = {special_id(tok, t) for t in SPECIAL_TOKENS}
    keep = []
    for i in range(tok.get_vocab_size()):
        if i in specials:
            continue
        text = tok.decode([i], skip_special_tokens=False)
        if text and all(32 <= ord(c) < 127 for c in text):
            keep.append(i)
    return keep


def build_source(src: Path, raw_head: bool) -> dict[str, int]:
    """Write a transformers checkpoint (random weights) plus tokenizer/processor files to src."""
    import torch
    from transformers import GenerationConfig, Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tok = train_tokenizer()
    vocab = tok.get_vocab_size()
    ids = {t: special_id(tok, t) for t in SPECIAL_TOKENS}
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]

    config = Qwen2VLConfig(
        text_config={
            **TEXT_CONFIG,
            "vocab_size": vocab,
            "bos_token_id": None,
            "eos_token_id": eos,
            "pad_token_id": pad,
        },
        vision_config=dict(VISION_CONFIG),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        eos_token_id=eos,
        pad_token_id=pad,
        bos_token_id=None,
        dtype="float32",
    )

    torch.manual_seed(SEED)
    model = Qwen2VLForConditionalGeneration(config).eval()
    printable = printable_token_ids(tok)
    if not raw_head:
        with torch.no_grad():
            head = model.lm_head.weight
            gen = torch.Generator().manual_seed(HEAD_SEED)
            new = torch.zeros_like(head)
            rows = torch.tensor(printable, dtype=torch.long)
            new[rows] = torch.randn((len(printable), head.shape[1]), generator=gen) * 0.6
            head.copy_(new)
    model.generation_config = GenerationConfig(
        bos_token_id=None, eos_token_id=eos, pad_token_id=pad, do_sample=False
    )
    model.save_pretrained(src)

    tok.save(str(src / "tokenizer.json"))
    write_json(src / "tokenizer_config.json", tokenizer_config(tok))
    write_json(src / "special_tokens_map.json", special_tokens_map())
    write_json(src / "preprocessor_config.json", PREPROCESSOR_CONFIG)
    write_json(src / "chat_template.json", {"chat_template": CHAT_TEMPLATE})
    (src / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    n_params = sum(p.numel() for p in model.parameters())
    return {"vocab": vocab, "printable": len(printable), "params": int(n_params)}


def export(src: Path, out: Path) -> None:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",  # everything is local; never reach for the hub
        TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        TRANSFORMERS_VERBOSITY="error",
        TOKENIZERS_PARALLELISM="false",
    )
    cmd = [
        sys.executable, "-m", "optimum.commands.optimum_cli", "export", "openvino",
        "--model", str(src), "--task", "image-text-to-text", "--weight-format", "fp16", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, env=env)


def finalize(src: Path, exported: Path, out: Path) -> None:
    """Copy the kept files to out, replacing the ones the exporter rewrote its own way."""
    for name in [
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "preprocessor_config.json",
        "chat_template.json",
        "chat_template.jinja",
    ]:
        shutil.copyfile(src / name, exported / name)
    missing = [n for n in OUTPUT_FILES if not (exported / n).is_file()]
    if missing:
        raise RuntimeError(f"export did not produce {missing}")
    for xml in exported.glob("*.xml"):
        if SRC_DIRNAME in xml.read_text(encoding="utf-8"):
            raise RuntimeError(f"{xml.name} mentions the temp source path")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.is_file() and old.name not in OUTPUT_FILES:
            old.unlink()
    for name in OUTPUT_FILES:
        shutil.copyfile(exported / name, out / name)


def build(out: Path, raw_head: bool = False) -> None:
    if out.exists() and any(out.iterdir()) and not (out / "config.json").exists():
        raise SystemExit(f"refusing to overwrite {out}: not empty and not a model directory")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tiny-vlm-") as tmp:
        src = Path(tmp) / SRC_DIRNAME
        src.mkdir()
        info = build_source(src, raw_head)
        t1 = time.perf_counter()
        log(f"[build] source checkpoint {t1 - t0:.1f}s: {info}")
        exported = Path(tmp) / "exported"
        export(src, exported)
        t2 = time.perf_counter()
        log(f"[build] optimum-cli export {t2 - t1:.1f}s")
        finalize(src, exported, out)
    total = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    log(f"[build] wrote {out} ({total:,} bytes) in {time.perf_counter() - t0:.1f}s")


# --------------------------------------------------------------------------------------------
# Verify (needs only openvino-genai)
# --------------------------------------------------------------------------------------------


def make_image(height: int, width: int, seed: int, nhwc: bool = False) -> Any:
    """A deterministic uint8 RGB image as an ov.Tensor, HWC or NHWC (1, H, W, 3)."""
    import numpy as np
    import openvino as ov

    rng = np.random.default_rng(seed)
    arr = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    if nhwc:
        arr = arr[None]
    return ov.Tensor(np.ascontiguousarray(arr))


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise AssertionError(msg)


def _printable(text: str) -> bool:
    return bool(text) and all(32 <= ord(c) < 127 for c in text)


def verify(model_dir: str | os.PathLike[str], max_new_tokens: int = 12) -> None:
    """Check the model with openvino_genai alone; raises AssertionError on failure."""
    import openvino_genai as og

    path = str(model_dir)
    prompt = "Describe the picture."
    img = make_image(100, 140, seed=1)
    img_nhwc = make_image(100, 140, seed=1, nhwc=True)
    img2 = make_image(64, 80, seed=2)
    config = og.GenerationConfig()
    config.max_new_tokens = max_new_tokens
    config.do_sample = False

    t = time.perf_counter()
    pipe = og.VLMPipeline(path, "CPU")
    log(f"[verify] VLMPipeline load {time.perf_counter() - t:.2f}s")
    template = str(pipe.get_tokenizer().chat_template)
    _check("<|vision_start|>" in template, "tokenizer IR carries no Qwen2-VL chat template")

    def run_vlm(images: Sequence[Any]) -> tuple[str, int, float]:
        t0 = time.perf_counter()
        res = pipe.generate(prompt, images=list(images), generation_config=config)
        dt = time.perf_counter() - t0
        return str(res.texts[0]), int(res.perf_metrics.get_num_input_tokens()), dt

    text_img, n_img, dt = run_vlm([img])
    log(
        f"[verify] VLMPipeline.generate +1 image (HWC 100x140) {dt:.2f}s, "
        f"{n_img} prompt tokens -> {text_img!r}"
    )
    text_nhwc, n_nhwc, dt = run_vlm([img_nhwc])
    log(
        f"[verify] VLMPipeline.generate +1 image (NHWC) {dt:.2f}s, "
        f"{n_nhwc} prompt tokens -> {text_nhwc!r}"
    )
    text_none, n_none, dt = run_vlm([])
    log(
        f"[verify] VLMPipeline.generate no image {dt:.2f}s, {n_none} prompt tokens -> {text_none!r}"
    )
    text_two, n_two, dt = run_vlm([img, img2])
    log(f"[verify] VLMPipeline.generate +2 images {dt:.2f}s, {n_two} prompt tokens -> {text_two!r}")

    for text in (text_img, text_none, text_two):
        _check(_printable(text), f"VLMPipeline returned {text!r}: empty or not printable ASCII")
    _check(n_img > n_none, f"image added no prompt tokens ({n_img} vs {n_none})")
    _check(n_two > n_img, f"second image added no prompt tokens ({n_two} vs {n_img})")
    _check(text_img != text_none, "the image did not change the output")
    _check(text_nhwc == text_img and n_nhwc == n_img, "NHWC and HWC images disagree")
    again, _, _ = run_vlm([img])
    _check(again == text_img, "greedy VLMPipeline output is not repeatable")

    t = time.perf_counter()
    sched = og.SchedulerConfig()
    sched.cache_size = 1
    cb = og.ContinuousBatchingPipeline(path, sched, "CPU")
    tokenizer = cb.get_tokenizer()
    log(f"[verify] ContinuousBatchingPipeline load {time.perf_counter() - t:.2f}s")

    requests: list[tuple[str, list[Any]]] = [
        (prompt, [img]),
        ("What is in these two images?", [img, img2]),
        ("Tell me a story.", []),
    ]
    t = time.perf_counter()
    handles = [cb.add_request(i, p, imgs, config) for i, (p, imgs) in enumerate(requests)]
    steps = 0
    while cb.has_non_finished_requests():
        cb.step()
        steps += 1
    dt = time.perf_counter() - t
    log(f"[verify] CB 3 requests (1, 2, 0 images) in {steps} steps, {dt:.2f}s")
    cb_texts = []
    for i, handle in enumerate(handles):
        outputs = handle.read_all()
        _check(len(outputs) == 1, f"CB request {i}: expected 1 output, got {len(outputs)}")
        ids = list(outputs[0].generated_ids)
        text = str(tokenizer.decode(ids))
        cb_texts.append(text)
        log(
            f"[verify] CB add_request {i} ({len(requests[i][1])} image(s)): "
            f"{len(ids)} tokens -> {text!r}"
        )
        _check(_printable(text), f"CB request {i} returned {text!r}")
        _check(len(ids) == max_new_tokens, f"CB request {i} stopped early ({len(ids)} tokens)")
    _check(cb_texts[0] == text_img, f"CB {cb_texts[0]!r} != VLMPipeline {text_img!r}")

    t = time.perf_counter()
    results = cb.generate([prompt], images=[[img]], generation_config=[config])
    gen_text = str(results[0].texts[0])
    log(f"[verify] CB.generate(images=...) {time.perf_counter() - t:.2f}s -> {gen_text!r}")
    _check(gen_text == text_img, "CB.generate disagrees with VLMPipeline")
    log("[verify] OK")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("out", type=Path, help="output directory (replaced)")
    parser.add_argument("--verify", action="store_true", help="check the result with genai")
    parser.add_argument("--verify-only", action="store_true", help="only check an existing dir")
    parser.add_argument(
        "--raw-head", action="store_true", help="keep the random lm_head (may emit EOS/bytes)"
    )
    args = parser.parse_args(argv)
    if not args.verify_only:
        build(args.out, raw_head=args.raw_head)
    if args.verify or args.verify_only:
        verify(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
