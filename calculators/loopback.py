"""The input stream handler options of a node that cycles over a LOOPBACK back edge.

OVMS's graphs give such a node (the LLM node, a generative Python node) the SyncSet handler with
LOOPBACK in a sync set of its own, so the back edge's packet re-triggers the node without waiting
for a new request; nodes whose graph forgets the handler get this default.
"""

from __future__ import annotations

from graphruntime._proto.stream_handler_options_pb2 import SyncSetInputStreamHandlerOptions

LOOPBACK = "LOOPBACK"


def loopback_sync_sets() -> SyncSetInputStreamHandlerOptions:
    """SyncSet options with LOOPBACK:0 in a set of its own."""
    options = SyncSetInputStreamHandlerOptions()
    options.sync_set.add().tag_index.append(f"{LOOPBACK}:0")
    return options
