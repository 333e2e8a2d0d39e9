"""Headway Python SDK: report training progress, honour checkpoint requests, and
query/steer jobs from automation. Standard library only.

    import headway
    for step in range(total):
        ...
        headway.report(step, total_steps=total, loss=loss)   # non-blocking, never raises
        if headway.should_checkpoint():                       # SIGUSR1 before a stop
            save_checkpoint()

Outside Headway (no HEADWAY_URL / HEADWAY_JOB) report() is a no-op, so the same script
runs anywhere. Framework adapters live in headway.callbacks (imported on demand).
"""

import pkgutil as _pkgutil

# A build tree keeps the compiled part of the package (headway/_intake*.so) in a
# directory of its own; with that directory on sys.path it joins this package.
__path__ = _pkgutil.extend_path(__path__, __name__)

from .artifacts import load_artifact, restore_checkpoint, save_artifact, save_checkpoint
from .checkpoint import install_on_import as _install_on_import
from .checkpoint import should_checkpoint
from .client import Client, HeadwayError
from .reporter import Reporter, flush, init, report

__all__ = ["report", "flush", "should_checkpoint", "init", "Reporter", "Client",
           "HeadwayError", "save_artifact", "load_artifact", "save_checkpoint",
           "restore_checkpoint"]
__version__ = "0.1.0"

_install_on_import()
