"""Build tiny random media models for openvino-genai's pipelines, cached by their inputs.

    python tools/media_models.py        # prints the paths as JSON (builds what is missing)

Three models, built from random weights in the export venv of tools/rag_models.py (graphrt's
`export` extra: torch, transformers, diffusers, optimum-intel...) and converted in fp32 by
`graphrt export image_generation|speech2text|text2speech` (optimum-cli underneath), so the
fixtures are what a user's export writes, graph.pbtxt included:

* speech-to-text (WhisperPipeline): Whisper with d_model 64, 2+2 layers, 80 mel bins and the
  real 30 s window (1500 encoder positions), `--task automatic-speech-recognition-with-past`.
* image generation (Text2ImagePipeline, Image2ImagePipeline, InpaintingPipeline): the Stable
  Diffusion 1.5 layout (CLIP text encoder, UNet2DConditionModel with 4 input channels, which
  genai also inpaints with, AutoencoderKL with SD's 8x downscaling, PNDM scheduler),
  `--task text-to-image`; default size 64x64 px (an 8x8 latent). Plus a random LoRA for its
  UNet (kohya-ss names, `stable_diffusion_lora` in the JSON) that genai's Adapter applies.
* text-to-speech (Text2SpeechPipeline): SpeechT5ForTextToSpeech and a SpeechT5HifiGan vocoder
  (256 samples per frame at 16 kHz), `--task text-to-audio --model-kwargs '{"vocoder": DIR}'`.

Everything lives in $GRAPHRT_TEST_CACHE (default ~/.cache/graphrt-tests) under names keyed by the
export venv (its pins), this file's source and graphrt's export code: a build happens once per
machine, and file locks keep parallel runs from building the same thing twice. Each entry holds
`source/` (the Hugging Face checkpoint) and `repo/` (the model repository `graphrt export`
wrote: config.json and the model directory); the printed paths are the model directories. On
this 2-core machine the export venv takes about 1 minute with a warm pip cache (once, shared
with rag_models.py) and the three models about 2 minutes together.

Nothing can be downloaded (no model hub), so the tokenizers are made here from a small inline
corpus, and the random weights are shaped so that outputs are deterministic, differ with their
inputs and look like the real thing:

* Whisper: byte-level BPE (learnt here by a deterministic merge loop) followed by Whisper's
  special tokens in Whisper's order (<|endoftext|>, <|startoftranscript|>, 99 language tokens
  <|en|>..<|su|>, <|translate|>, <|transcribe|>, <|startoflm|>, <|startofprev|>,
  <|nospeech|>, <|notimestamps|>, then 1501 timestamps <|0.00|>..<|30.00|>), so genai's id
  arithmetic holds (timestamp_begin = no_timestamps_token_id + 1; text ids < eos). Three
  dimensions of the decoder's residual stream are reserved (no layer writes them otherwise):
  END, written by the learnt positions only (negative up to END_POSITION, then rising); MARK,
  set by the embedding of <|notimestamps|>; MODE, which one head of the first layer copies
  MARK into when <|notimestamps|> is in the prompt. The output head reads them: word tokens
  (only ones that decode to " word" or punctuation) are favoured before END_POSITION, a closing
  timestamp at it, EOS after it; timestamps are pushed down in no-timestamps mode. So a
  transcript is ~13 tokens of pseudo-words ending with EOS (also when sampling); with
  return_timestamps it is one segment <|0.00|> text <|t|> EOS. The audio encoder's first conv
  and the decoder's cross-attention are scaled up (different audio, different text); the
  language and task tokens change the text too; language detection always answers <|en|>.
* Stable Diffusion: a CLIP BPE vocabulary with </w> word ends learnt the same way; diffusers'
  default init, with the UNet's cross-attention output scaled up so the prompt visibly changes
  the image (as does the seed); pixel statistics are those of a mid-grey noisy picture.
  The random VAE does not reconstruct: Image2Image at low strength is not close to its input.
* SpeechT5: a sentencepiece char model trained here (needs protobuf, or openvino-tokenizers
  does not recognise it and optimum silently writes no tokenizer IR). The decoder prenet's
  always-on dropout is given p = 0 (its mask is then all-zero: the exported RandomUniform no
  longer matters and separate pipeline instances agree). Token embeddings and the decoder's
  cross-attention are scaled up so the text changes the sound, the vocoder's last conv is
  scaled to an RMS of ~0.1. The stop head never fires: a text of n tokens (characters + </s>)
  gives n * MAXLENRATIO frames of 256 samples (generation_config.json's maxlenratio).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import itertools
import json
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rag_models import BuildError, ExportEnv, build_export_env, cache_dir, digest, locked, run

SCRIPT = Path(__file__).resolve()
RECIPE_VERSION = "1"  # bump when something outside this file changes what is built
SEED = 0

# --------------------------------------------------------------------------------------------
# Shared helpers (both venvs: standard library only at top level)
# --------------------------------------------------------------------------------------------


def _module(name: str) -> Any:
    """Import a module of the export venv (torch, transformers...) without typing it."""
    return importlib.import_module(name)


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (byte-level BPE alphabets, in GPT-2's order)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\xa1"), ord("\xac") + 1),
        *range(ord("\xae"), ord("\xff") + 1),
    ]
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars), strict=True))


def learn_bpe(words: Iterable[Sequence[str]], max_merges: int) -> list[tuple[str, str]]:
    """Byte-pair merges of the symbol sequences: the most frequent pair first, ties broken by
    the pair's text, so a rebuild gives the same vocabulary (tokenizers' trainer does not)."""
    sequences: Counter[tuple[str, ...]] = Counter(tuple(word) for word in words)
    merges: list[tuple[str, str]] = []
    while len(merges) < max_merges:
        pairs: Counter[tuple[str, str]] = Counter()
        for sequence, count in sequences.items():
            for pair in itertools.pairwise(sequence):
                pairs[pair] += count
        if not pairs:
            break
        (first, second), count = min(pairs.items(), key=lambda item: (-item[1], item[0]))
        if count < 2:
            break
        merges.append((first, second))
        merged: Counter[tuple[str, ...]] = Counter()
        for sequence, n in sequences.items():
            out: list[str] = []
            i = 0
            while i < len(sequence):
                if i + 1 < len(sequence) and sequence[i] == first and sequence[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(sequence[i])
                    i += 1
            merged[tuple(out)] += n
        sequences = merged
    return merges


CORPUS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Hello world, this is a test of speech recognition on a tiny model.",
    "Please transcribe what you hear: one, two, three, four, five, six.",
    "The weather today is sunny with a light wind from the west and some clouds.",
    "Open the door, turn on the light and call me in the morning, please.",
    "We went to the market to buy apples, bread, cheese and fresh milk.",
    "A photo of a red car parked on a quiet street at night.",
    "A painting of a small house in the mountains under a blue sky.",
    "An astronaut riding a horse on the moon, digital art, high detail.",
    "Bonjour le monde, je suis un petit modele de reconnaissance vocale.",
    "Guten Tag, die Katze sitzt auf dem Tisch und schlaft in der Sonne.",
    "Numbers and dates: the first of May, at ten past nine in the evening.",
]

# --------------------------------------------------------------------------------------------
# Whisper (runs in the export venv)
# --------------------------------------------------------------------------------------------

WHISPER_LANGUAGES = 99  # whisper-tiny/base/small/medium/large-v2: <|en|> .. <|su|>
WHISPER_CONFIG: dict[str, Any] = {
    "num_mel_bins": 80,
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "max_source_positions": 1500,  # 30 s of 10 ms frames, halved by the encoder's stride
    "max_target_positions": 448,
    "tie_word_embeddings": False,  # the head is shaped separately from the token embeddings
}
END_POSITION = 16  # decoder position where the "end" channel turns positive
END, MARK, MODE = 0, 1, 2  # reserved decoder dimensions (see the module docstring)
MARK_QUERY = 20.0
CONV1_SCALE = 30.0  # audio content outweighs the encoder's sinusoidal positions
CROSS_QK_SCALE = 40.0  # sharp cross-attention: a few audio frames decide
CROSS_OUT_SCALE = 4.0  # the cross-attention output outweighs the token embeddings
WORD_RE = r"^ [A-Za-z]{2,}$|^[.,]$"  # whole words after a space, and punctuation


def _whisper_tokenizer() -> tuple[Any, dict[str, int], int]:
    tokenizers = _module("tokenizers")
    whisper_tok = _module("transformers.models.whisper.tokenization_whisper")
    pre = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words = [piece for line in CORPUS for piece, _ in pre.pre_tokenize_str(line)]
    merges = learn_bpe(words * 2, 400)
    vocab = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    for first, second in merges:
        vocab.setdefault(first + second, len(vocab))
    n_regular = len(vocab)
    languages = list(whisper_tok.LANGUAGES)[:WHISPER_LANGUAGES]
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{code}|>" for code in languages),
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]
    tokenizer = whisper_tok.WhisperTokenizer(vocab=vocab, merges=merges)
    added = tokenizers.AddedToken
    tokenizer.add_special_tokens(
        {
            "additional_special_tokens": [
                added(t, special=True, normalized=False) for t in specials[1:]
            ]
        }
    )
    tokenizer.add_tokens(
        [added(f"<|{i * 0.02:.2f}|>", special=False, normalized=False) for i in range(1501)]
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in specials}
    expected = list(range(n_regular, n_regular + len(specials)))
    if [ids[t] for t in specials] != expected or len(tokenizer) != n_regular + len(specials) + 1501:
        raise RuntimeError(f"Whisper special tokens got unexpected ids: {ids}")
    tokenizer.set_prefix_tokens(language=None, task=None, predict_timestamps=False)
    return tokenizer, ids, n_regular


def _word_token_ids(tokenizer: Any, n_regular: int) -> list[int]:
    regex = _module("re")
    pattern = regex.compile(WORD_RE)
    return [i for i in range(n_regular) if pattern.match(tokenizer.decode([i]))]


def whisper_source(out: Path) -> None:
    torch = _module("torch")
    transformers = _module("transformers")
    np = _module("numpy")
    tokenizer, ids, n_regular = _whisper_tokenizer()
    eos, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    no_timestamps = ids["<|notimestamps|>"]
    lang_to_id = {t: ids[t] for t in list(ids)[2 : 2 + WHISPER_LANGUAGES]}
    space = tokenizer.convert_tokens_to_ids("\u0120")
    config = transformers.WhisperConfig(
        **WHISPER_CONFIG,
        vocab_size=len(tokenizer),
        decoder_start_token_id=sot,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
        begin_suppress_tokens=[space, eos],
        suppress_tokens=[],
    )
    torch.manual_seed(SEED)
    model = transformers.WhisperForConditionalGeneration(config).eval()
    words = _word_token_ids(tokenizer, n_regular)
    feature_extractor = transformers.WhisperFeatureExtractor(feature_size=80)
    t = np.arange(16000, dtype=np.float32) / 16000
    calibration = feature_extractor(
        (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32),
        sampling_rate=16000,
        return_tensors="pt",
    ).input_features
    with torch.no_grad():
        encoder, decoder = model.model.encoder, model.model.decoder
        encoder.conv1.weight.mul_(CONV1_SCALE)
        reserved = [END, MARK, MODE]
        for layer in decoder.layers:
            layer.encoder_attn.q_proj.weight.mul_(CROSS_QK_SCALE)
            layer.encoder_attn.k_proj.weight.mul_(CROSS_QK_SCALE)
            layer.encoder_attn.out_proj.weight.mul_(CROSS_OUT_SCALE)
            # The reserved dimensions of the residual stream are written as set below only.
            for linear in (layer.self_attn.out_proj, layer.encoder_attn.out_proj, layer.fc2):
                linear.weight[reserved] = 0.0
                linear.bias[reserved] = 0.0
        tokens, positions = decoder.embed_tokens.weight, decoder.embed_positions.weight
        spread = float((tokens[:, 3:].var() + positions[:, 3:].var()).sqrt())
        tokens[:, reserved] = 0.0
        positions[:, reserved] = 0.0
        tokens[no_timestamps, MARK] = 3.0 * spread
        # The last head of the first layer looks for <|notimestamps|> (a constant query, keys
        # from the MARK dimension) and copies it into MODE at every later position.
        attention = decoder.layers[0].self_attn
        head_dim = WHISPER_CONFIG["d_model"] // WHISPER_CONFIG["decoder_attention_heads"]
        last = slice(WHISPER_CONFIG["d_model"] - head_dim, WHISPER_CONFIG["d_model"])
        first = last.start
        for linear in (attention.q_proj, attention.k_proj, attention.v_proj):
            linear.weight[last] = 0.0
            if linear.bias is not None:
                linear.bias[last] = 0.0
        attention.q_proj.bias[first] = MARK_QUERY
        attention.k_proj.weight[first, MARK] = 1.0
        attention.v_proj.weight[first, MARK] = 1.0
        attention.out_proj.weight[:, last] = 0.0
        attention.out_proj.weight[MODE, first] = 1.0
        # The spread of the other dimensions at the final layer norm sets the channels' scale.
        seen: list[Any] = []
        hook = decoder.layer_norm.register_forward_hook(lambda m, i, o: seen.append(i[0]))
        prompt = [sot, ids["<|en|>"], ids["<|transcribe|>"], no_timestamps, *words[:20]]
        decoder(
            input_ids=torch.tensor([prompt]),
            encoder_hidden_states=encoder(calibration).last_hidden_state,
        )
        hook.remove()
        final = seen[0][0]
        sigma = float(final[:, 3:].std(dim=1).mean())
        attention.out_proj.weight[MODE, first] = sigma / float(final[4:, MODE].mean())
        positions[:END_POSITION, END] = -0.5 * sigma
        positions[END_POSITION, END] = 0.6 * sigma
        positions[END_POSITION + 1 :, END] = 1.8 * sigma
        norm = decoder.layer_norm
        norm.weight[reserved] = torch.tensor([4.0, 0.0, 8.0])
        norm.bias[reserved] = 0.0
        head = model.proj_out.weight
        generator = torch.Generator().manual_seed(SEED + 1)
        head.zero_()
        rows = torch.tensor(words)
        head[rows, 3:] = torch.randn((len(words), head.shape[1] - 3), generator=generator) * 0.5
        # Without the part every position shares, a few tokens would win everywhere.
        common = torch.nn.functional.layer_norm(final, final.shape[-1:])[:, 3:].mean(dim=0)
        common /= common.norm()
        head[rows, 3:] -= (head[rows, 3:] @ common)[:, None] * common
        scale = 0.5 * (head.shape[1] - 3) ** 0.5  # rows of equal norm: no favourite tokens
        head[rows, 3:] *= scale / head[rows, 3:].norm(dim=1, keepdim=True)
        head[rows, END] = -4.0
        head[eos, END] = 4.0
        first_timestamp = no_timestamps + 1
        n_timestamps = head.shape[0] - first_timestamp
        head[first_timestamp:, 3:] = (
            torch.randn((n_timestamps, head.shape[1] - 3), generator=generator) * 0.05
        )
        head[first_timestamp:, END] = 2.0
        head[first_timestamp, END] = 1.0  # the first timestamp is <|0.00|>, as in real speech
        head[first_timestamp:, MODE] = -1.5  # no timestamps after <|notimestamps|>
        head[ids["<|en|>"], END] = -2.0  # language detection answers English
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    feature_extractor.save_pretrained(out)
    suppress = [
        sot,
        *lang_to_id.values(),
        *(ids[t] for t in ("<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>")),
        ids["<|nospeech|>"],
    ]
    write_json(
        out / "generation_config.json",
        {
            "alignment_heads": [[1, 0], [1, 1], [1, 2], [1, 3]],
            "begin_suppress_tokens": [space, eos],
            "bos_token_id": eos,
            "decoder_start_token_id": sot,
            "eos_token_id": eos,
            "is_multilingual": True,
            "lang_to_id": lang_to_id,
            "max_initial_timestamp_index": 50,
            "max_length": WHISPER_CONFIG["max_target_positions"],
            "no_timestamps_token_id": no_timestamps,
            "pad_token_id": eos,
            "prev_sot_token_id": ids["<|startofprev|>"],
            "return_timestamps": False,
            "suppress_tokens": suppress,
            "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        },
    )


# --------------------------------------------------------------------------------------------
# Stable Diffusion 1.5 layout (runs in the export venv)
# --------------------------------------------------------------------------------------------

CLIP_SPLIT = (  # CLIP's pre-tokenizer pattern
    r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"
)
CLIP_TEXT: dict[str, Any] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 77,
    "projection_dim": 32,
    "hidden_act": "quick_gelu",
}
UNET: dict[str, Any] = {
    "sample_size": 8,  # latent 8x8 -> 64x64 px images by default
    "in_channels": 4,
    "out_channels": 4,
    "block_out_channels": (16, 32),
    "layers_per_block": 1,
    "norm_num_groups": 8,
    "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
    "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"),
    "cross_attention_dim": 32,
    "attention_head_dim": 4,
}
VAE: dict[str, Any] = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": (8, 8, 16, 16),  # four blocks: SD's 8x downscaling
    "down_block_types": ("DownEncoderBlock2D",) * 4,
    "up_block_types": ("UpDecoderBlock2D",) * 4,
    "layers_per_block": 1,
    "norm_num_groups": 4,
    "sample_size": 64,
    "scaling_factor": 0.18215,
}
PROMPT_SCALE = 4.0
LORA_RANK = 4
LORA_SCALE = 0.5
SCHEDULER: dict[str, Any] = {  # Stable Diffusion 1.5's scheduler_config.json
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "set_alpha_to_one": False,
    "skip_prk_steps": True,
    "steps_offset": 1,
}


def _clip_tokenizer() -> Any:
    regex = _module("regex")
    transformers = _module("transformers")
    table = bytes_to_unicode()
    words = []
    for line in CORPUS:
        for word in regex.findall(CLIP_SPLIT, line.lower()):
            symbols = [table[b] for b in word.encode("utf-8")]
            symbols[-1] += "</w>"
            words.append(symbols)
    merges = learn_bpe(words * 2, 400)
    alphabet = list(table.values())
    vocab = {char: i for i, char in enumerate([*alphabet, *(c + "</w>" for c in alphabet)])}
    for first, second in merges:
        vocab.setdefault(first + second, len(vocab))
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = transformers.CLIPTokenizer(vocab=vocab, merges=merges, model_max_length=77)
    return tokenizer


def sd_source(out: Path, lora: Path) -> None:
    torch = _module("torch")
    transformers = _module("transformers")
    diffusers = _module("diffusers")
    tokenizer = _clip_tokenizer()
    torch.manual_seed(SEED)
    text_encoder = transformers.CLIPTextModel(
        transformers.CLIPTextConfig(
            **CLIP_TEXT,
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    ).eval()
    unet = diffusers.UNet2DConditionModel(**UNET).eval()
    with torch.no_grad():
        for name, module in unet.named_modules():
            if name.endswith("attn2"):  # cross-attention: the prompt visibly changes the image
                module.to_out[0].weight.mul_(PROMPT_SCALE)
    vae = diffusers.AutoencoderKL(**VAE).eval()
    scheduler = diffusers.PNDMScheduler(**SCHEDULER)
    pipe = diffusers.StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(out)
    sd_lora(unet, lora)


def sd_lora(unet: Any, path: Path) -> None:
    """A random rank-LORA_RANK LoRA on the UNet's attention projections, in kohya-ss naming
    (lora_unet_<module path with _>.lora_down/lora_up/alpha): the format of most SD 1.5 LoRAs,
    which genai's Adapter maps onto the exported UNet."""
    torch = _module("torch")
    safetensors = _module("safetensors.torch")
    generator = torch.Generator().manual_seed(SEED + 2)
    tensors = {}
    for name, module in unet.named_modules():
        if not isinstance(module, torch.nn.Linear) or ".attn" not in name:
            continue
        key = "lora_unet_" + name.replace(".", "_")
        fan_in, fan_out = module.in_features, module.out_features
        down = torch.randn((LORA_RANK, fan_in), generator=generator) / fan_in**0.5
        up = torch.randn((fan_out, LORA_RANK), generator=generator) * LORA_SCALE
        tensors[f"{key}.lora_down.weight"] = down.contiguous()
        tensors[f"{key}.lora_up.weight"] = up.contiguous()
        tensors[f"{key}.alpha"] = torch.tensor(float(LORA_RANK))
    path.parent.mkdir(parents=True, exist_ok=True)
    safetensors.save_file(tensors, str(path))


# --------------------------------------------------------------------------------------------
# SpeechT5 (runs in the export venv)
# --------------------------------------------------------------------------------------------

SPEECHT5: dict[str, Any] = {
    "hidden_size": 32,
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_layers": 2,
    "decoder_attention_heads": 2,
    "decoder_ffn_dim": 64,
    "speech_decoder_prenet_layers": 2,
    "speech_decoder_prenet_units": 32,
    "speech_decoder_prenet_dropout": 0.0,  # see the module docstring
    "speech_decoder_postnet_layers": 2,
    "speech_decoder_postnet_units": 32,
    "speech_decoder_postnet_kernel": 5,
    "speaker_embedding_dim": 512,  # genai hard-codes {1, 512}
    "num_mel_bins": 80,
    "reduction_factor": 2,
    "max_text_positions": 600,
    "max_speech_positions": 1876,
}
HIFIGAN: dict[str, Any] = {
    "model_in_dim": 80,
    "sampling_rate": 16000,
    "upsample_initial_channel": 32,
    "upsample_rates": [4, 4, 4, 4],  # 256 samples per frame, as the real one
    "upsample_kernel_sizes": [8, 8, 8, 8],
    "resblock_kernel_sizes": [3],
    "resblock_dilation_sizes": [[1, 3, 5]],
    "normalize_before": False,
}
WAVEFORM_RMS = 0.1
TOKEN_SCALE = 50.0
TEXT_QK_SCALE = 10.0
TEXT_OUT_SCALE = 10.0  # v and out: ~ the residual's size (the decoder is post-LN)
MAXLENRATIO = 4.0  # frames per input token (stop head never fires): ~16 ms * 4 per character


def speecht5_source(out: Path, vocoder_dir: Path) -> None:
    torch = _module("torch")
    transformers = _module("transformers")
    spm = _module("sentencepiece")
    out.mkdir(parents=True, exist_ok=True)
    text = list(CORPUS)
    chars = sorted({c for line in text for c in line.replace(" ", "")})
    model_file = _module("io").BytesIO()  # no path ends up in the model's trainer_spec
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text),
        model_writer=model_file,
        model_type="char",
        vocab_size=len(chars) + 5,  # + <s> <pad> </s> <unk> and the word boundary
        character_coverage=1.0,
        bos_id=0,
        pad_id=1,
        eos_id=2,
        unk_id=3,
        num_threads=1,
        minloglevel=2,
    )
    (out / "spm_char.model").write_bytes(model_file.getvalue())
    tokenizer = transformers.SpeechT5Tokenizer(vocab_file=str(out / "spm_char.model"))
    torch.manual_seed(SEED)
    model = transformers.SpeechT5ForTextToSpeech(
        transformers.SpeechT5Config(**SPEECHT5, vocab_size=len(tokenizer))
    ).eval()
    with torch.no_grad():
        # Token embeddings (init std 0.02) would drown in the sinusoidal positions (~0.7).
        model.speecht5.encoder.prenet.embed_tokens.weight.mul_(TOKEN_SCALE)
        for layer in model.speecht5.decoder.wrapped_decoder.layers:  # the text shapes the sound
            layer.encoder_attn.q_proj.weight.mul_(TEXT_QK_SCALE)
            layer.encoder_attn.k_proj.weight.mul_(TEXT_QK_SCALE)
            layer.encoder_attn.v_proj.weight.mul_(TEXT_OUT_SCALE)
            layer.encoder_attn.out_proj.weight.mul_(TEXT_OUT_SCALE)
        stop = model.speech_decoder_postnet.prob_out
        stop.weight.zero_()
        stop.bias.fill_(-20.0)  # sigmoid ~ 2e-9: the length comes from maxlenratio
    vocoder = transformers.SpeechT5HifiGan(transformers.SpeechT5HifiGanConfig(**HIFIGAN)).eval()
    with torch.no_grad():
        # Random init gives a near-silent waveform: scale the last conv to a speech-like level.
        ids = tokenizer(CORPUS[1], return_tensors="pt").input_ids
        speaker = torch.randn((1, 512), generator=torch.Generator().manual_seed(SEED))
        spectrogram = model.generate_speech(ids, speaker, maxlenratio=MAXLENRATIO)
        conv = vocoder.conv_post
        for _ in range(3):  # tanh bends the scale a little: settle it in a few passes
            rms = float(vocoder(spectrogram).pow(2).mean().sqrt())
            conv.weight.mul_(WAVEFORM_RMS / rms)
            conv.bias.mul_(WAVEFORM_RMS / rms)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    vocoder.save_pretrained(vocoder_dir)


# --------------------------------------------------------------------------------------------
# Orchestration (project venv)
# --------------------------------------------------------------------------------------------

LORA_FILE = "lora/tiny_sd_lora.safetensors"
SPEECH_GENERATION_CONFIG = {"minlenratio": 0.0, "maxlenratio": MAXLENRATIO, "threshold": 0.5}


ROOT = SCRIPT.parents[1]
# The code that writes an export: a change to it rebuilds the fixtures.
EXPORT_CODE = tuple(
    ROOT / "graphrt" / "export" / name
    for name in ("text_tasks.py", "image_audio_tasks.py", "image_audio_graphs.py")
)


def _key(env: ExportEnv, name: str) -> str:
    code = [hashlib.sha256(path.read_bytes()).hexdigest() for path in (SCRIPT, *EXPORT_CODE)]
    return digest(env.key, name, code, RECIPE_VERSION)


def _graphrt_export(env: ExportEnv, task: str, root: Path, name: str, *flags: str) -> Path:
    """`graphrt export TASK` of root/source into the repository root/repo (optimum-cli from
    the export venv): OVMS's layout and graph.pbtxt, as a user gets them. Returns the model."""
    run(
        [
            sys.executable,
            "-m",
            "graphrt.cli.main",
            "export",
            task,
            "--source_model",
            root / "source",
            "--model_name",
            name,
            "--weight-format",
            "fp32",
            "--model_repository_path",
            root / "repo",
            "--config_file_path",
            root / "repo" / "config.json",
            *flags,
        ],
        env={**env.environ(), "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"},
        cwd=ROOT,
    )
    return root / "repo" / name


def _require(directory: Path, names: Iterable[str]) -> None:
    missing = [name for name in names if not (directory / name).is_file()]
    if missing:
        raise BuildError(f"{directory}: the export wrote no {missing}")


def _build(env: ExportEnv, name: str, make: Any) -> Path:
    root = cache_dir() / f"{name}-{_key(env, name)}"
    with locked(root.name):
        if not (root / "ready").is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            started = time.monotonic()
            make(root)
            (root / "ready").write_text(f"{time.monotonic() - started:.1f} s\n", encoding="utf-8")
    return root / "repo" / name


def _source(env: ExportEnv, kind: str, *paths: Path) -> None:
    run([env.python, SCRIPT, "source", kind, *paths], env=env.environ())


def build_whisper(env: ExportEnv) -> Path:
    """The tiny Whisper for WhisperPipeline (cached)."""

    def make(root: Path) -> None:
        _source(env, "whisper", root / "source")
        model = _graphrt_export(env, "speech2text", root, "tiny-whisper")
        _require(
            model,
            [
                "openvino_encoder_model.xml",
                "openvino_decoder_model.xml",
                "openvino_tokenizer.xml",
                "openvino_detokenizer.xml",
                "preprocessor_config.json",
                "generation_config.json",
            ],
        )
        # optimum re-saves generation_config.json through transformers; genai reads the keys
        # it needs (lang_to_id, task_to_id, alignment_heads...) from ours.
        shutil.copyfile(
            root / "source" / "generation_config.json", model / "generation_config.json"
        )

    return _build(env, "tiny-whisper", make)


def build_stable_diffusion(env: ExportEnv) -> Path:
    """The tiny SD-1.5-layout pipeline for Text2Image/Image2Image/InpaintingPipeline (cached)."""

    def make(root: Path) -> None:
        _source(env, "sd", root / "source", root / LORA_FILE)
        model = _graphrt_export(env, "image_generation", root, "tiny-sd")
        _require(
            model,
            [
                "model_index.json",
                "text_encoder/openvino_model.xml",
                "tokenizer/openvino_tokenizer.xml",
                "unet/openvino_model.xml",
                "vae_decoder/openvino_model.xml",
                "vae_encoder/openvino_model.xml",
                "scheduler/scheduler_config.json",
            ],
        )

    return _build(env, "tiny-sd", make)


def stable_diffusion_lora(model: Path) -> Path:
    """The random LoRA made with the SD model (model: what build_stable_diffusion returned)."""
    return model.parents[1] / LORA_FILE


def build_speecht5(env: ExportEnv) -> Path:
    """The tiny SpeechT5 + HiFi-GAN for Text2SpeechPipeline (cached)."""

    def make(root: Path) -> None:
        _source(env, "speecht5", root / "source", root / "vocoder")
        model = _graphrt_export(
            env, "text2speech", root, "tiny-speecht5", "--vocoder", str(root / "vocoder")
        )
        _require(
            model,
            [
                "openvino_encoder_model.xml",
                "openvino_decoder_model.xml",
                "openvino_postnet.xml",
                "openvino_vocoder.xml",
                "openvino_tokenizer.xml",
                "openvino_detokenizer.xml",
                "config.json",
            ],
        )
        path = model / "generation_config.json"
        config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        write_json(path, {**config, **SPEECH_GENERATION_CONFIG})

    return _build(env, "tiny-speecht5", make)


def build_all() -> dict[str, str]:
    env = build_export_env()
    sd = str(build_stable_diffusion(env))
    return {
        "export_python": str(env.python),
        "whisper": str(build_whisper(env)),
        "stable_diffusion": sd,
        "stable_diffusion_lora": str(stable_diffusion_lora(Path(sd))),
        "speecht5": str(build_speecht5(env)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    source = sub.add_parser("source", help="(export venv) write one Hugging Face source model")
    source.add_argument("kind", choices=["whisper", "sd", "speecht5"])
    source.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.command == "source":
        if args.kind == "whisper":
            whisper_source(args.paths[0])
        elif args.kind == "sd":
            sd_source(args.paths[0], args.paths[1])
        else:
            speecht5_source(args.paths[0], args.paths[1])
        return 0
    print(json.dumps(build_all(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
