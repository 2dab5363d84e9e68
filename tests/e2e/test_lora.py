"""LoRA adapters on an LLM, as vLLM serves them: `--lora_modules name=path`, the adapter chosen by
the request's `model`, listed by /v3/models with its base as `parent`.

The adapters are PEFT directories made here (random, fixed seeds, non-zero B) for the tiny random
llama (SmolLM2's tokenizer and architecture, 2 layers of width 64: its answers are gibberish, but
greedy and reproducible, which is all a comparison with genai needs), and the model is a GGUF,
whose graph genai builds without Hugging Face's layer names (servables/llm/gguf_lora.py names
them). Every answer is checked against openvino-genai driven
directly with the same adapter and scale, and against the base model's (they must differ).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import openai
import pytest

from servables.llm.gguf_lora import named_model_dir
from servables.llm.lora import LoraAdapterSpec, load_adapter
from tests.conftest import TINY_LLM

if TYPE_CHECKING:
    from conftest import Golden, Launch, Server

# The tiny llama's projection shapes (in, out) and its depth.
WIDTH, FFN = TINY_LLM["width"], TINY_LLM["ffn"]
KV_WIDTH = WIDTH // TINY_LLM["heads"] * TINY_LLM["kv_heads"]
SHAPES = {
    "self_attn.q_proj": (WIDTH, WIDTH),
    "self_attn.k_proj": (WIDTH, KV_WIDTH),
    "self_attn.v_proj": (WIDTH, KV_WIDTH),
    "self_attn.o_proj": (WIDTH, WIDTH),
    "mlp.gate_proj": (WIDTH, FFN),
    "mlp.up_proj": (WIDTH, FFN),
    "mlp.down_proj": (FFN, WIDTH),
}
LAYERS = TINY_LLM["layers"]
BASE = "smollm2"  # the name test servers give the model (conftest's MODEL_NAME)
MAX_TOKENS = 24
PROMPTS = ("Once upon a time", "The best way to learn a language is")


def write_peft_adapter(
    out: Path,
    seed: int,
    modules: list[str],
    rank: int,
    lora_alpha: float,
    b_scale: float,
    shapes: Mapping[str, tuple[int, int]] = SHAPES,
    layers: int = LAYERS,
) -> Path:
    """A PEFT LoRA directory (adapter_model.safetensors + adapter_config.json) for a llama with
    these projection `shapes` and `layers` (the tiny llama's unless told)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray[Any, Any]] = {}
    for layer in range(layers):
        for module in modules:
            fan_in, fan_out = shapes[module]
            name = f"base_model.model.model.layers.{layer}.{module}"
            a = rng.standard_normal((rank, fan_in)) / np.sqrt(fan_in)
            b = rng.standard_normal((fan_out, rank)) * b_scale
            tensors[f"{name}.lora_A.weight"] = a.astype(np.float32)
            tensors[f"{name}.lora_B.weight"] = b.astype(np.float32)
    out.mkdir(parents=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": lora_alpha,
        "target_modules": sorted({m.split(".")[-1] for m in modules}),
        "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
    }
    (out / "adapter_config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    return {
        # attention only, PEFT scale lora_alpha / r = 2
        "poet": write_peft_adapter(
            root / "poet", 0, ["self_attn.q_proj", "self_attn.v_proj"], 8, 16, 0.05
        ),
        # every projection, including the MLP's, scale 1
        "pirate": write_peft_adapter(root / "pirate", 1, list(SHAPES), 4, 4, 0.2),
    }


class AdapterGolden:
    """Greedy outputs of openvino-genai itself with one adapter, on the same named graph."""

    def __init__(self, gguf: Path, adapter: Path) -> None:
        self.genai: Any = importlib.import_module("openvino_genai")
        self.ov: Any = importlib.import_module("openvino")
        loaded = load_adapter(LoraAdapterSpec("golden", adapter))
        self.adapters = self.genai.AdapterConfig(self.genai.Adapter(loaded.weights), loaded.scale)
        scheduler = self.genai.SchedulerConfig()
        scheduler.cache_size = 1
        self.pipeline: Any = self.genai.ContinuousBatchingPipeline(
            str(named_model_dir(gguf)), scheduler, "CPU", {"adapters": self.adapters}
        )
        self.tokenizer: Any = self.pipeline.get_tokenizer()

    def generate(self, ids: list[int], max_tokens: int) -> str:
        config = self.pipeline.get_config()
        config.max_new_tokens = max_tokens
        config.do_sample = False
        config.adapters = self.adapters
        tensor = self.ov.Tensor(np.asarray([ids], dtype=np.int64))
        (result,) = self.pipeline.generate([tensor], [config])
        text: str = self.tokenizer.decode(result.m_generation_ids[0], skip_special_tokens=True)
        return text


@pytest.fixture(scope="module")
def adapter_goldens(tiny_llm_gguf: Path, adapters: dict[str, Path]) -> dict[str, AdapterGolden]:
    return {name: AdapterGolden(tiny_llm_gguf, path) for name, path in adapters.items()}


@pytest.fixture(scope="module")
def expected(
    adapter_goldens: dict[str, AdapterGolden], tiny_golden: Golden
) -> Callable[[str, str], str]:
    """expected(model, prompt): the completion genai gives for that model (base or adapter)."""
    cache: dict[tuple[str, str], str] = {}

    def answer(model: str, prompt: str) -> str:
        if (model, prompt) not in cache:
            ids = tiny_golden.encode(prompt, True)
            if model == BASE:
                cache[model, prompt] = tiny_golden.completion(prompt, MAX_TOKENS).text
            else:
                cache[model, prompt] = adapter_goldens[model].generate(ids, MAX_TOKENS)
        return cache[model, prompt]

    return answer


@pytest.fixture(scope="module")
def lora_server(tiny_llm_gguf: Path, adapters: dict[str, Path], launch: Launch) -> Iterator[Server]:
    modules = [f"{name}={path}" for name, path in adapters.items()]
    with launch(["--model_path", str(tiny_llm_gguf), "--lora_modules", *modules]) as running:
        yield running


def test_gguf_layers_are_named_by_their_place_in_the_graph(tiny_llm_gguf: Path) -> None:
    """Every decoder layer's seven projections, under Hugging Face's names, with their shapes."""
    ov: Any = importlib.import_module("openvino")
    model = ov.Core().read_model(str(named_model_dir(tiny_llm_gguf) / "openvino_model.xml"))
    named = {op.get_friendly_name(): op for op in model.get_ordered_ops()}
    for layer in range(LAYERS):
        for module, (fan_in, fan_out) in SHAPES.items():
            node = named[f"model.layers.{layer}.{module}"]
            assert node.get_type_name() == "MatMul"
            assert node.get_output_partial_shape(0)[-1].get_length() == fan_out, (layer, module)
            weights = node.get_input_partial_shape(1).to_shape()
            assert sorted(weights) == sorted((fan_in, fan_out)), (layer, module)


def complete(client: openai.OpenAI, model: str, prompt: str) -> str:
    response = client.completions.create(
        model=model, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0
    )
    return response.choices[0].text


def test_adapters_are_listed_with_their_base_as_parent(lora_server: Server) -> None:
    with lora_server.http() as http:
        listed = {m["id"]: m for m in http.get("/v3/models").json()["data"]}
        one = http.get("/v1/models/poet").json()
    assert set(listed) == {BASE, "poet", "pirate"}
    assert "parent" not in listed[BASE]
    assert listed["poet"]["parent"] == listed["pirate"]["parent"] == BASE
    assert one["id"] == "poet" and one["parent"] == BASE


def test_each_model_answers_as_genai_with_its_adapter(
    lora_server: Server, expected: Callable[[str, str], str]
) -> None:
    client = lora_server.client()
    answers = {model: complete(client, model, PROMPTS[0]) for model in (BASE, "poet", "pirate")}
    for model, text in answers.items():
        assert text == expected(model, PROMPTS[0]), model
    assert len(set(answers.values())) == 3, f"an adapter changed nothing: {answers}"


def test_adapters_and_base_answer_side_by_side_under_load(
    lora_server: Server, expected: Callable[[str, str], str]
) -> None:
    """Requests for both adapters and the base model, all at once, streamed and not."""
    work = [(m, p, s) for m in (BASE, "poet", "pirate") for p in PROMPTS for s in (0, 1)]
    client = lora_server.client()

    def run(item: tuple[str, str, int]) -> str:
        model, prompt, stream = item
        if not stream:
            return complete(client, model, prompt)
        chunks = client.completions.create(
            model=model, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, stream=True
        )
        return "".join(chunk.choices[0].text for chunk in chunks if chunk.choices)

    with ThreadPoolExecutor(len(work)) as pool:
        answers = list(pool.map(run, work))
    for (model, prompt, stream), text in zip(work, answers, strict=True):
        assert text == expected(model, prompt), (model, prompt, stream)


def test_chat_with_an_adapter(
    lora_server: Server, adapter_goldens: dict[str, AdapterGolden], tiny_golden: Golden
) -> None:
    messages: list[Mapping[str, Any]] = [{"role": "user", "content": "Name a colour."}]
    response = lora_server.client().chat.completions.create(
        model="pirate",
        messages=messages,
        max_tokens=MAX_TOKENS,
        temperature=0,  # type: ignore[arg-type]
    )
    ids = tiny_golden.encode(tiny_golden.chat_prompt(messages), False)
    want = adapter_goldens["pirate"].generate(ids, MAX_TOKENS)
    assert response.model == "pirate"
    assert response.choices[0].message.content == want


def test_unknown_adapter_is_a_404_in_openai_shape(lora_server: Server) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        complete(lora_server.client(), "poet2", "hi")
    body: Any = raised.value.body
    assert body["code"] == "model_not_found" and "poet2" in body["message"]
    assert complete(lora_server.client(), "poet", "hi")  # nothing else broke


def test_an_adapter_for_another_model_fails_the_load(
    tiny_llm_gguf: Path, tmp_path: Path, start_server: Callable[[list[str]], Server]
) -> None:
    """Tensors that no layer takes would serve the base model under the adapter's name: the
    model fails to load with a message that says so (and the server stays up, as OVMS's)."""
    from safetensors.numpy import save_file

    other = tmp_path / "gpt2-lora"
    other.mkdir()
    name = "base_model.model.transformer.h.0.attn.c_attn"
    save_file(
        {
            f"{name}.lora_A.weight": np.ones((4, 768), np.float32),
            f"{name}.lora_B.weight": np.ones((2304, 4), np.float32),
        },
        str(other / "adapter_model.safetensors"),
    )
    server = start_server(["--model_path", str(tiny_llm_gguf), "--lora_modules", f"gpt2={other}"])
    try:
        deadline = time.monotonic() + 120
        while "failed to load" not in server.log() and time.monotonic() < deadline:
            assert server.process.poll() is None, server.log()
            time.sleep(0.2)
        assert "LoRA adapter 'gpt2': none of its 1 target layers" in server.log(), server.log()
        with server.http() as http:
            assert http.get("/v2/health/ready").status_code != 200
    finally:
        assert server.stop() == 0


def test_bad_lora_modules_are_one_line_errors(
    tiny_llm_gguf: Path, tmp_path: Path, run_graphrt: Callable[..., Any]
) -> None:
    for value, message in (
        (f"lost={tmp_path / 'missing'}", "does not exist"),
        ("no-equals-sign", "expected name=path"),
    ):
        done = run_graphrt(
            "serve", "--model_path", str(tiny_llm_gguf), "--lora_modules", value, cwd=tmp_path
        )
        assert done.returncode != 0
        assert message in done.stderr, done.stderr
