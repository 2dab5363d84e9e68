"""How an engine process lives and dies with the frontend that started it.

The frontend owns shutdown: on SIGINT/SIGTERM it stops accepting, lets streams finish, and only
then tells each engine to stop (a Shutdown message). An engine that took the signal itself would
die first and leave the drain nothing to drain. So:

- the client starts each worker in a session of its own (`start_new_session`), so a terminal's
  Ctrl-C and `kill -TERM -PGID` (docker stop on a shell entrypoint, many init systems), which
  signal a process group, reach only the frontend;
- the worker ignores SIGINT and SIGTERM as its first act (`ignore_stop_signals`), for managers
  that signal every process they started (systemd's default KillMode=control-group);
- the worker must not outlive its frontend however that ends (SIGKILL, a crash, the OOM killer
  choosing it), or it would hold the model's memory forever. On Linux the kernel guarantees it:
  prctl(PR_SET_PDEATHSIG, SIGKILL) kills the worker the moment its parent is gone, even while it
  is inside a long native `step()` that runs no Python; a check of the parent pid right after
  closes the race of a parent that died before the call. This is chosen over watching the pipe
  or polling the parent, which only work when the worker is between steps and reading. Two
  caveats, both handled: the death signal follows the parent *thread* that forked, so the
  client starts workers from the event-loop thread, which lives as long as the server; and the
  setting does not survive exec, so the worker sets it itself. Elsewhere (no prctl) a daemon
  thread polls the parent pid once a second; the command pipe's EOF also ends the worker's loop.

A worker inherits the frontend's environment, and with it the server's log file (OVMS's
--log_path, in `LOG_PATH_ENVIRONMENT`), which it appends its lines to beside stderr.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

LOG_PATH_ENVIRONMENT = "GRAPHRT_LOG_PATH"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_SECONDS = 1.0


def ignore_stop_signals() -> None:
    """SIGINT and SIGTERM are the frontend's to act on; it stops us with a message."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _kernel_kills_orphan() -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False if unavailable."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _poll_parent(parent_pid: int) -> None:
    while True:
        time.sleep(PARENT_POLL_SECONDS)
        if os.getppid() != parent_pid:
            os._exit(1)


def die_with_parent(parent_pid: int) -> None:
    """Make sure this process ends when `parent_pid` (the frontend) does; see the docstring."""
    if not _kernel_kills_orphan():
        threading.Thread(target=_poll_parent, args=(parent_pid,), daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before we asked: we are an orphan already
        os._exit(1)
