"""Makes `import headway` resolve to sdk/python/headway (no install needed), joined by
its compiled intake from the build tree where there is one, and provides fixtures: a
capture server (a test double of the Headway API, see capture_server.py) and a factory
of reporters that are always closed, so no test leaves an atexit flush behind. Every
reporter the factory makes is tested with each intake there is: the C one where it is
built, and the Python one.
"""

import os
import sys
import tempfile

# What a job and a test both read and write lives outside /tmp: each job sees
# the host's /tmp through a layer of its own, so what it writes there the
# test would not see.
tempfile.tempdir = os.environ.get("HEADWAY_TEST_TMPDIR") or "/var/tmp"

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# The build tree that made HEADWAY_BIN, else ./build.
BUILD = (os.path.dirname(os.path.abspath(os.environ["HEADWAY_BIN"]))
         if os.environ.get("HEADWAY_BIN") else os.path.join(REPO, "build"))
BUILT_PACKAGE = os.path.join(BUILD, "python")  # holds headway/_intake*.so
sys.path.insert(0, BUILT_PACKAGE)
sys.path.insert(0, os.path.dirname(HERE))  # sdk/python
sys.path.insert(0, HERE)                   # capture_server

import pytest  # noqa: E402

from capture_server import CaptureServer  # noqa: E402
import headway  # noqa: E402
from headway import reporter as reporter_mod  # noqa: E402


@pytest.fixture
def server():
    srv = CaptureServer()
    yield srv
    srv.close()


INTAKES = {"python-intake": reporter_mod.PyIntake}
if reporter_mod.Intake is not reporter_mod.PyIntake:
    INTAKES["c-intake"] = reporter_mod.Intake


@pytest.fixture(params=sorted(INTAKES))
def intake(request, monkeypatch):
    """Each intake in turn: the one the reporters made meanwhile use."""
    monkeypatch.setattr(reporter_mod, "Intake", INTAKES[request.param])
    return INTAKES[request.param]


@pytest.fixture
def make_reporter(intake):
    made = []

    def make(url="", job="job-1", token="tok-1", env=None, **opts):
        opts.setdefault("interval", 0)
        opts.setdefault("min_backoff", 0.01)
        opts.setdefault("max_backoff", 0.05)
        opts.setdefault("request_timeout", 5)
        r = headway.Reporter(url=url, job=job, token=token, env=env if env is not None else {},
                             **opts)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close(timeout=0)


@pytest.fixture
def clean_default(monkeypatch):
    """Isolates the process-wide default reporter and the HEADWAY_* / rank env."""
    for k in list(os.environ):
        if k.startswith("HEADWAY_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
            monkeypatch.delenv(k, raising=False)
    old = reporter_mod._set_default(None)
    yield monkeypatch
    new = reporter_mod._set_default(old)
    if new is not None:
        new.close(timeout=0)
