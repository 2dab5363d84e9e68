"""The image's HEALTHCHECK: exit 0 when graphrt's /v2/health/ready answers 200, else 1.

The port is the `--rest_port` of the container's PID 1 when that is `graphrt serve` (the image's
entrypoint under Docker and Kubernetes), else $GRAPHRT_REST_PORT, else that of the lowest-numbered
`graphrt serve` process in /proc (e.g. behind `docker run --init`), else 8000; so
`docker run IMAGE --rest_port 9001` needs no extra health-check flag. Standard library only: the
base image may have no curl.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

DEFAULT_PORT = 8000
WILDCARDS = {"", "0.0.0.0", "::", "[::]"}


def flag(argv: Sequence[str], name: str) -> str | None:
    """The last value of `--name VALUE` or `--name=VALUE` (argparse's rule: the last one wins)."""
    value: str | None = None
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            value = argv[index + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def is_server(argv: Sequence[str]) -> bool:
    """`graphrt serve ...` or `python -m graphrt.cli.main serve ...`."""
    for index, arg in enumerate(argv[:-1]):
        if (Path(arg).name == "graphrt" or arg == "graphrt.cli.main") and argv[
            index + 1
        ] == "serve":
            return True
    return False


def command_line(pid: int, proc: Path = Path("/proc")) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def server_argv(proc: Path = Path("/proc")) -> list[str] | None:
    """The command line of the server this check is about (see the module docstring)."""
    first = command_line(1, proc)
    if is_server(first):
        return first
    if os.environ.get("GRAPHRT_REST_PORT"):
        return None
    pids = sorted(int(entry.name) for entry in proc.iterdir() if entry.name.isdigit())
    for pid in pids:
        argv = command_line(pid, proc)
        if is_server(argv):
            return argv
    return None


def ready_url(argv: Sequence[str] | None) -> str:
    port = (flag(argv, "--rest_port") if argv else None) or os.environ.get("GRAPHRT_REST_PORT")
    host = (flag(argv, "--rest_bind_address") if argv else None) or "127.0.0.1"
    if host in WILDCARDS:
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port or DEFAULT_PORT}/v2/health/ready"


def main() -> int:
    url = ready_url(server_argv())
    try:
        with urllib.request.urlopen(url, timeout=4) as response:
            status: int = response.status
    except (urllib.error.URLError, OSError) as error:
        print(f"{url}: {error}", file=sys.stderr)
        return 1
    print(f"{url}: {status}")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
