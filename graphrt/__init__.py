"""graphrt, the application: CLI, model repository, HTTP and gRPC frontends, metrics.

Everything here may import every other package; nothing imports this package.
"""

import os

# grpcio's fork handlers log "skipping fork() handlers" whenever the server starts a subprocess
# (engine workers, tools) while gRPC threads run. The server never forks without exec, so it
# needs no fork support; this must be set before grpc is first imported.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from graphrt.own_packages import check_importable

# Before anything in the application imports `calculators` or `servables`: a package of the same
# name from another distribution would otherwise fail far from the cause.
check_importable()
