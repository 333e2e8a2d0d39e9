"""Process exit: the atexit flush delivers what is queued, and never hangs on a dead
server. Runs real child processes (sys.executable) with the SDK on PYTHONPATH; the
"server" is the capture server test double or a silent listener."""

import os
import subprocess
import sys
import textwrap

from capture_server import SilentServer

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(code, url, timeout=30):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWAY_")}
    env.update(PYTHONPATH=SDK, HEADWAY_URL=url, HEADWAY_JOB="exitjob", HEADWAY_TOKEN="t")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_exit_flushes_queued_points(server):
    p = run_child("""
        import headway
        headway.init(interval=30)          # nothing would be sent before exit otherwise
        for i in range(100):
            headway.report(i, loss=i / 100)
    """, server.url)
    assert p.returncode == 0, p.stderr
    steps = [pt["step"] for pt in server.points()]
    assert steps[-1] == 99 and sorted(set(steps)) == list(range(100))


def test_exit_is_bounded_when_server_never_answers():
    silent = SilentServer()
    try:
        # exit_timeout=0.5: the child must exit although its request can never complete;
        # the subprocess timeout (30 s) is only a hang guard.
        p = run_child("""
            import headway
            headway.init(exit_timeout=0.5, request_timeout=60)
            headway.report(1, loss=1.0)
            print("done")
        """, silent.url)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == "done"
        assert "not delivered" in p.stderr
    finally:
        silent.close()
