"""should_checkpoint(): SIGUSR1 and HEADWAY_CHECKPOINT_FILE."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import headway
from headway import checkpoint

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def restore_sigusr1():
    old = signal.getsignal(signal.SIGUSR1)
    checkpoint._reset_for_tests()
    yield
    signal.signal(signal.SIGUSR1, old)
    checkpoint._installed = False
    checkpoint._previous = None
    checkpoint._reset_for_tests()


def test_sigusr1_sets_should_checkpoint(restore_sigusr1, monkeypatch):
    monkeypatch.delenv("HEADWAY_CHECKPOINT_FILE", raising=False)
    assert headway.should_checkpoint() is False  # installs the handler lazily
    os.kill(os.getpid(), signal.SIGUSR1)
    # Python runs the handler in the main thread at the next bytecode boundary;
    # loop a little in case the signal is delivered late (hang guard only).
    for _ in range(1000):
        if headway.should_checkpoint():
            break
        time.sleep(0.001)
    assert headway.should_checkpoint() is True
    assert headway.should_checkpoint() is True  # sticky


def test_existing_python_handler_is_chained(restore_sigusr1):
    seen = []
    signal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))
    checkpoint._installed = False
    assert headway.should_checkpoint() is False
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(1000):
        if seen:
            break
    assert headway.should_checkpoint() is True
    assert seen == [signal.SIGUSR1]


def test_checkpoint_file(restore_sigusr1, monkeypatch, tmp_path):
    flag = tmp_path / "ckpt"
    monkeypatch.setenv("HEADWAY_CHECKPOINT_FILE", str(flag))
    assert headway.should_checkpoint() is False
    flag.write_text("")
    assert headway.should_checkpoint() is True


def _run(code, env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    env.update(env_extra)
    env["PYTHONPATH"] = SDK
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=30)


def test_handler_installed_on_import_under_headway():
    # SIGUSR1 arrives before the script ever calls should_checkpoint(): the process must
    # survive it (default action would kill it) and remember the request.
    p = _run("""
        import os, signal, headway
        os.kill(os.getpid(), signal.SIGUSR1)
        print(headway.should_checkpoint())
    """, {"HEADWAY_JOB": "j"})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True"


def test_import_outside_headway_leaves_sigusr1_alone():
    p = _run("""
        import signal, headway
        print(signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL)
    """, {})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True"
