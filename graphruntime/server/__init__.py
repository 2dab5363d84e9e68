"""The application layer: CLI, model repository, HTTP and gRPC frontends, metrics.

Everything here may import every other package; nothing imports this package.
"""

import os

# grpcio's fork handlers log "skipping fork() handlers" whenever the server starts a subprocess
# (engine workers, tools) while gRPC threads run. The server never forks without exec, so it
# needs no fork support; this must be set before grpc is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
