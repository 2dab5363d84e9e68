"""Build a tiny, randomly initialised BERT cross-encoder (Hugging Face format) for offline tests.

    EXPORT_VENV/bin/python tools/make_tiny_cross_encoder.py SRC        # ~5 s: torch + transformers
    PATH=EXPORT_VENV/bin:$PATH graphrt export rerank_ov --source_model SRC \\
        --model_name tiny-cross-encoder --weight-format fp32 --model_repository_path \\
        tests/fixtures/models --overwrite_models

The export venv is the one tests/e2e/export_env.py builds (torch 2.13.0 CPU, transformers 5.0.0,
optimum-intel). The exported directory (~0.3 MB: IR, tokenizer IRs, graph.pbtxt) is committed
under tests/fixtures/models/tiny-cross-encoder/, so serving tests need only openvino-genai; this
script is how to rebuild it, and the export test builds the source again to check that
`graphrt export rerank_ov` accepts a Hugging Face cross-encoder directory.

What it is and why:

* BertForSequenceClassification with one label: the shape of real cross-encoders
  (cross-encoder/ms-marco-MiniLM-*, BAAI/bge-reranker-* have one logit; the score is its
  sigmoid). BERT's pair template ([CLS] query [SEP] document [SEP], token types 0 then 1) is the
  case that needs the tokenizer's pair support and token_type_ids.
* max_position_embeddings 128: small, so tests reach the long-document chunking and query
  truncation paths with short texts.
* A WordPiece vocabulary built here from a small inline corpus (no hub access): BERT's special
  tokens, every character (alone and as a `##` continuation) and every corpus word, sorted, so
  unseen words still tokenize (into characters); lower-cased like BERT uncased. Built, not
  trained: `tokenizers`' trainer breaks ties differently from run to run.
* Everything is seeded (torch seed 0): a rebuild gives the same weights, so the committed IR and
  a fresh export of a rebuilt source score the same pairs the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SEED = 0
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CORPUS = [
    "What is the capital of France? Paris is the capital and largest city of France.",
    "Berlin is the capital of Germany. Rome is the capital of Italy.",
    "The cat sits on the mat. A dog runs in the park with a red ball.",
    "Vector search finds documents whose embeddings are close to the query embedding.",
    "A reranker scores each query and document pair and sorts documents by relevance.",
    "OpenVINO runs neural networks fast on Intel CPUs, GPUs and NPUs.",
    "Retrieval augmented generation adds retrieved documents to the prompt of a language model.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9. Punctuation: , . ; : ! ? ( ) - ' \"",
    "The quick brown fox jumps over the lazy dog near the river bank in the morning.",
    "Machine learning models learn patterns from data to make predictions about new data.",
]
MODEL_CONFIG = {
    "vocab_size": 0,  # set from the trained vocabulary
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 128,
    "type_vocab_size": 2,
    "num_labels": 1,
    "pad_token_id": 0,
}


def build(output: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    output.mkdir(parents=True, exist_ok=True)
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    words = sorted(
        {
            word
            for line in CORPUS
            for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(line))
        }
    )
    characters = sorted({character for word in words for character in word})
    tokens = [*SPECIAL_TOKENS, *characters, *(f"##{c}" for c in characters), *words]
    vocab = {token: index for index, token in enumerate(dict.fromkeys(tokens))}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizer
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoders.WordPiece()
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = BertTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
        do_lower_case=True,
        model_max_length=MODEL_CONFIG["max_position_embeddings"],
    )
    fast.save_pretrained(output)

    torch.manual_seed(SEED)
    config = BertConfig(**{**MODEL_CONFIG, "vocab_size": tokenizer.get_vocab_size()})
    model = BertForSequenceClassification(config).eval()
    # BERT's initialisation (std 0.02) makes every input's [CLS] state nearly the same, so all
    # scores would be about equal; wider weights make the score depend on the words.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                continue
            std = 1.0 if "embeddings" in name else 0.3
            parameter.normal_(0.0, std)
    model.save_pretrained(output)
    print(json.dumps({"output": str(output), "vocab": tokenizer.get_vocab_size()}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path, help="directory for the Hugging Face model")
    build(parser.parse_args(argv).output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
