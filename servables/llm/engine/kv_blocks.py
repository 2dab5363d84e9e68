"""The KV cache's block layout, read once when a continuous-batching engine loads.

Routers that score replicas by prefix-cache affinity (the Kubernetes inference gateway's endpoint
picker) want a server's block size in tokens and its number of blocks. openvino-genai reports
neither: only the cache's size in bytes and the share of its blocks in use. The block size is
fixed per device (genai's kv_cache_manager.hpp: 32 tokens on CPU, 16 on GPU); the bytes per
block are measured here with one probe request of a single token, which takes exactly one block:
the step's usage is then 1/blocks of the cache, so blocks = 100 / usage and bytes per block =
cache bytes / blocks (both exact: a cache is a whole number of blocks). With a cache that grows
on demand (cache_size 0) the probe's cache is that one block.

The probe's token is the vocabulary's last id, which no prompt starts with: genai's prefix cache
keeps the probe's block, and a prompt starting with the same token would reuse its keys and
values instead of computing them within its own prefill.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from servables.llm.engine.messages import EngineSpec, KVBlocks
from servables.llm.model_files import vocabulary_size

logger = logging.getLogger(__name__)

BLOCK_SIZE = {"CPU": 32, "GPU": 16}
PROBE_REQUEST_ID = 0  # the frontend numbers its requests from 1
MAX_PROBE_STEPS = 4


def measure(pipeline: Any, spec: EngineSpec) -> KVBlocks | None:
    """The layout of a text model's continuous-batching cache; None when it cannot be read
    (other pipelines, speculative decoding's two caches, a device without a known block size)."""
    block_size = BLOCK_SIZE.get(spec.device.split(".")[0])
    if spec.kind != "LM_CB" or spec.draft or block_size is None:
        return None
    vocabulary = vocabulary_size(Path(spec.models_path))
    if not vocabulary:
        return None
    import numpy as np
    import openvino as ov
    import openvino_genai

    config = pipeline.get_config()
    config.max_new_tokens = 1
    prompt = ov.Tensor(np.asarray([[vocabulary - 1]], dtype=np.int64))
    try:
        handle = pipeline.add_request(PROBE_REQUEST_ID, prompt, config)
        for _ in range(MAX_PROBE_STEPS):
            pipeline.step()
            metrics = pipeline.get_metrics()
            if handle.get_status() != openvino_genai.GenerationStatus.RUNNING:
                break
    except RuntimeError as error:
        logger.warning("could not read the KV cache's block layout: %s", error)
        return None
    usage, cache_bytes = float(metrics.cache_usage), int(metrics.kv_cache_size_in_bytes)
    blocks = round(100.0 / usage) if usage > 0 else 0
    if not blocks or cache_bytes % blocks:
        logger.warning(
            "could not read the KV cache's block layout (usage %.4f%% of %d bytes)",
            usage,
            cache_bytes,
        )
        return None
    return KVBlocks(block_size, cache_bytes // blocks, cache_bytes)
