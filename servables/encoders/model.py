"""An encoder (BERT-like) OpenVINO model: padded batches of token ids in, one row per input out.

Embedding and rerank models are plain OpenVINO models, not generative pipelines, so they are run
with openvino directly: openvino's `InferRequest.infer` releases the GIL for the whole inference
(measured: a 0.5 ms ticker thread kept ticking through 1.4 s inferences), so inferences run on
worker threads of the server process and never stall the event loop. openvino-genai's
TextEmbeddingPipeline and TextRerankPipeline drive the same models, but take only text (no token
ids), report no token counts, truncate silently and own one infer request each, so they cannot
batch requests of concurrent clients or refuse an input that is too long.

A model has `input_ids` and `attention_mask` inputs, sometimes `token_type_ids` and
`position_ids`; rows are padded on the right to the longest row of the batch.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from servables.encoders.model_dir import MODEL_FILE

logger = logging.getLogger(__name__)

IdArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]
# Rewrites the read ov.Model before it is compiled (e.g. adds pooling): gets the ov.Model,
# returns the model to compile and the index of the output `run` returns.
ModelTransform = Callable[[Any], tuple[Any, int]]


@dataclass(frozen=True)
class EncodedInput:
    """One row of a batch: token ids and, for pair models, their segment (token type) ids."""

    ids: IdArray
    type_ids: IdArray | None = None

    def __len__(self) -> int:
        return len(self.ids)


class EncoderModel:
    """A compiled model and a pool of infer requests; `run` is blocking and thread-safe."""

    def __init__(
        self,
        models_path: Path,
        device: str,
        properties: dict[str, Any],
        transform: ModelTransform | None = None,
        pad_token_id: int = 0,
    ) -> None:
        import openvino as ov

        core = ov.Core()
        model = core.read_model(str(models_path / MODEL_FILE))
        self.input_names = {port.get_any_name() for port in model.inputs}
        for required in ("input_ids", "attention_mask"):
            if required not in self.input_names:
                raise ValueError(f"{models_path / MODEL_FILE} has no {required} input")
        self.output_index = 0
        if transform is not None:
            model, self.output_index = transform(model)
        self.compiled = core.compile_model(model, device, properties)
        try:
            count = int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        except RuntimeError:
            count = 1
        self.parallel = max(1, count)
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for _ in range(self.parallel):
            self._requests.put(self.compiled.create_infer_request())
        self.pad_token_id = pad_token_id
        self.has_token_types = "token_type_ids" in self.input_names
        self.has_positions = "position_ids" in self.input_names

    def inputs(self, rows: Sequence[EncodedInput]) -> dict[str, npt.NDArray[np.int64]]:
        """The padded input tensors for `rows` (right padding, attention mask 0 on padding)."""
        width = max(len(row) for row in rows)
        ids = np.full((len(rows), width), self.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64)
        for index, row in enumerate(rows):
            ids[index, : len(row)] = row.ids
            mask[index, : len(row)] = 1
            if row.type_ids is not None:
                types[index, : len(row)] = row.type_ids
        tensors = {"input_ids": ids, "attention_mask": mask}
        if self.has_token_types:
            tensors["token_type_ids"] = types
        if self.has_positions:
            tensors["position_ids"] = np.broadcast_to(
                np.arange(width, dtype=np.int64), (len(rows), width)
            ).copy()
        return tensors

    def run(self, rows: Sequence[EncodedInput]) -> FloatArray:
        """Infer one batch; returns the chosen output, one row per input (float32)."""
        tensors = self.inputs(rows)
        request = self._requests.get()
        try:
            request.infer(tensors)
            output: FloatArray = np.array(
                request.get_output_tensor(self.output_index).data, dtype=np.float32
            )
        finally:
            self._requests.put(request)
        return output
