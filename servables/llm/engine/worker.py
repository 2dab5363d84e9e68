"""The engine process: owns one openvino-genai pipeline and drives it.

Started by servables.llm.engine.client as `python -m servables.llm.engine.worker` with the command
and event pipe descriptors and the frontend's pid. The first command is the `EngineSpec`; the worker
builds the pipeline (servables.llm.engine.pipeline), reads its KV cache's block layout
(servables.llm.engine.kv_blocks), answers `Ready` (or `LoadFailed`), and hands the pipeline to its
loop until `Shutdown` or the frontend goes away:

- continuous batching (`LM_CB` / `VLM_CB`): servables.llm.engine.batching, which also contains a
  grammar that breaks the pipeline by building a new one in place;
- stateful (LLMPipeline / VLMPipeline, chosen for NPU or `pipeline_type: LM`), one request at a
  time: servables.llm.engine.stateful.

If the continuous-batching loop reports `EngineFailed`, its `run()` returns and the worker exits;
the frontend fails the in-flight requests and its supervisor restarts the engine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

from servables.llm.engine import kv_blocks
from servables.llm.engine.batching import ContinuousBatchingLoop
from servables.llm.engine.lifetime import LOG_PATH_ENVIRONMENT, die_with_parent, ignore_stop_signals
from servables.llm.engine.messages import EngineSpec, LoadFailed, Ready, receive_command
from servables.llm.engine.pipeline import build_pipeline
from servables.llm.engine.stateful import StatefulLoop
from servables.llm.gguf_graph import saved_graph_dir
from servables.llm.model_files import tokenizer_location


def main(commands: Connection, events: Connection) -> None:
    """Process entry point: the first command is the EngineSpec."""
    spec = receive_command(commands)
    assert isinstance(spec, EngineSpec)
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    log_path = os.environ.get(LOG_PATH_ENVIRONMENT)
    if log_path:  # the server's --log_path
        handlers.append(logging.FileHandler(log_path, encoding="utf-8"))
    logging.basicConfig(
        level=spec.log_level,
        format=f"%(asctime)s %(levelname)s engine[{os.getpid()}]: %(message)s",
        handlers=handlers,
    )
    started = time.perf_counter()
    try:
        pipeline = build_pipeline(spec)
        tokenizer = pipeline.get_tokenizer()
        eos = int(tokenizer.get_eos_token_id())
        tokenizer_path = tokenizer_location(
            Path(spec.models_path), saved_graph_dir(Path(spec.models_path))
        )
    except Exception as error:  # anything the engine throws at load is the user's model problem
        events.send(LoadFailed(str(error).strip() or type(error).__name__))
        return
    seconds = time.perf_counter() - started
    logging.getLogger(__name__).info(
        "%s pipeline of %s loaded in %.1f s", spec.kind, spec.models_path, seconds
    )
    events.send(Ready(seconds, eos, str(tokenizer_path), kv_blocks.measure(pipeline, spec)))
    loop: ContinuousBatchingLoop | StatefulLoop
    if spec.kind in ("LM_CB", "VLM_CB"):
        loop = ContinuousBatchingLoop(pipeline, commands, events, lambda: build_pipeline(spec))
    else:
        loop = StatefulLoop(pipeline, commands, events)
    del pipeline, tokenizer  # the loop owns the pipeline (and may replace it)
    with contextlib.suppress(EOFError, BrokenPipeError):  # the frontend went away
        loop.run()


if __name__ == "__main__":
    # argv: command pipe fd, event pipe fd, the frontend's pid (see servables.llm.engine.lifetime)
    ignore_stop_signals()
    die_with_parent(int(sys.argv[3]))
    main(
        Connection(int(sys.argv[1]), writable=False),
        Connection(int(sys.argv[2]), readable=False),
    )
