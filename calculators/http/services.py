"""The graph services the application lends HTTP graphs.

Where images may come from (`--allowed_local_media_path`, `--allowed_media_domains`) is a server
setting, but requests are parsed inside the graph. The application provides one `MediaPolicy` per
graph as this service; a graph run without it (tests, embedding graphrt as a library) accepts
base64 data URLs only, the safe default.
"""

from __future__ import annotations

from graphruntime.services import GraphService
from servables.io.images.sources import MediaPolicy

MEDIA_POLICY: GraphService[MediaPolicy] = GraphService("media_policy", MediaPolicy)
