"""should_checkpoint(): has Headway asked this process to save a checkpoint?

Before Headway stops or preempts a job it sends SIGUSR1 to the training processes, then
waits a grace period before SIGTERM. Call should_checkpoint() every step (it costs an
attribute read and, only when HEADWAY_CHECKPOINT_FILE is set, one stat()) and save when it
returns True.

Returns True when either:
  * the process has received SIGUSR1 since the handler was installed (sticky: it stays
    True for the life of the process), or
  * the environment variable HEADWAY_CHECKPOINT_FILE names a path that exists (for
    launchers that cannot signal the process, e.g. a container runtime: they touch it).

The SIGUSR1 handler is installed
  * on import of `headway`, only if the importing thread is the main thread, the process
    runs under Headway (HEADWAY_JOB or HEADWAY_URL is set) and SIGUSR1 still has its default
    action (which would otherwise kill the process); outside Headway importing the
    package does not change how the process reacts to SIGUSR1;
  * otherwise lazily, on the first should_checkpoint() call made from the main thread.
    A Python handler already installed by someone else is chained (called after ours);
    a handler installed from C code (signal.getsignal() returns None) is left alone.
On platforms without SIGUSR1 only the file check applies. Thread-safe; never raises.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any, Callable, Optional

_SIGUSR1 = getattr(signal, "SIGUSR1", None)
_requested = False
_installed = False
_previous: Optional[Callable[..., Any]] = None
_lock = threading.Lock()


def _handler(signum: int, frame: Any) -> None:
    global _requested
    _requested = True
    prev = _previous
    if prev is not None:
        prev(signum, frame)


def _install(on_import: bool) -> None:
    global _installed, _previous
    if _SIGUSR1 is None:
        _installed = True
        return
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        if _installed:
            return
        try:
            current = signal.getsignal(_SIGUSR1)
            if current is _handler:
                _installed = True
                return
            if on_import:
                if current != signal.SIG_DFL:
                    return
            elif current is None:
                _installed = True  # a C-level handler: leave it alone, stop trying
                return
            _previous = current if callable(current) else None
            signal.signal(_SIGUSR1, _handler)
            _installed = True
        except (ValueError, OSError, RuntimeError):
            pass


def install_on_import() -> None:
    if os.environ.get("HEADWAY_JOB") or os.environ.get("HEADWAY_URL"):
        _install(on_import=True)


def should_checkpoint() -> bool:
    """True once a checkpoint was requested (SIGUSR1 or HEADWAY_CHECKPOINT_FILE)."""
    if not _installed:
        _install(on_import=False)
    if _requested:
        return True
    path = os.environ.get("HEADWAY_CHECKPOINT_FILE")
    if path:
        try:
            return os.path.exists(path)
        except (OSError, ValueError):
            return False
    return False


def _reset_for_tests() -> None:
    global _requested
    _requested = False
