"""End-to-end tests of the SDK against the real `headway` server binary (set
HEADWAY_BIN; scripts/test does), with real child processes: a 2-process
PyTorch DDP job (gloo, CPU) that reports through this SDK, and a reporter that
keeps working while the server is down."""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

import headway

BIN = os.environ.get("HEADWAY_BIN")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SDK = os.path.join(REPO, "sdk", "python")

pytestmark = pytest.mark.skipif(not BIN, reason="HEADWAY_BIN is not set (scripts/test sets it)")


class RealServer:
    """`headway server` with authentication on (the default): `token` is the admin token
    the first start wrote to DATA_DIR/admin-token, which client() sends."""

    def __init__(self, tmp, *args):
        self.data = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "server.log")
        self.args = list(args)
        self.url = None
        self.port = 0
        self.proc = None
        self.token = ""

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [BIN, "server", "--listen", "127.0.0.1:%d" % self.port, "--data-dir", self.data,
             "--gpus", "2"] + self.args, stdout=log, stderr=log)
        deadline = time.time() + 20
        while time.time() < deadline:
            with open(self.log_path) as f:
                m = re.findall(r"listening on (http://127\.0\.0\.1:(\d+))", f.read())
            if m:
                self.url, port = m[-1]
                self.port = int(port)
                with open(os.path.join(self.data, "admin-token")) as f:
                    self.token = f.read().strip()
                return self
            time.sleep(0.05)
        raise RuntimeError("server did not start")

    def client(self):
        return headway.Client(self.url, self.token)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


    def end_jobs(self):
        """Jobs outlive their server by design; end those a test left running. Each
        supervisor (`headway shim DATA/jobs/...`) leads its attempt's process group."""
        marker = ("shim " + os.path.join(self.data, "jobs") + "/").encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker in f.read().replace(b"\0", b" "):
                        os.killpg(int(pid), signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def real_server():
    # A supervisor killed at the end may have been writing its last file.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        srv = RealServer(tmp).start()
        yield srv
        srv.stop()
        srv.end_jobs()


def wait_for(predicate, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_ddp_job_reports_through_the_sdk(real_server):
    client = real_server.client()
    spec = {
        "name": "ddp-mlp",
        "command": [sys.executable if sys.executable.startswith("/usr/bin") else "/usr/bin/python3",
                    "-u", os.path.join(REPO, "examples", "train_mlp.py"),
                    "--steps", "200", "--step-delay", "0.01"],
        "env": {"PYTHONPATH": SDK},
        "resources": {"processes_per_node": 2},
        "time_limit": "5m",
    }
    client.submit_job(spec)
    seen_eta = []

    def finished():
        job = client.get_job("ddp-mlp")
        if job["state"] == "Running" and job["progress"]["eta_seconds"] is not None:
            seen_eta.append(job["progress"]["eta_seconds"])
        return job["state"] in ("Succeeded", "Failed", "Stopped")

    assert wait_for(finished, timeout=240)
    job = client.get_job("ddp-mlp")
    assert job["state"] == "Succeeded", job
    progress = job["progress"]
    assert progress["step"] == 200
    assert progress["total_steps"] == 200
    assert progress["percent"] == 100.0
    assert seen_eta, "an ETA was shown while the job ran"
    points = client.get_metric("ddp-mlp", "loss")
    assert len(points) == 20  # rank 0 only, every 10 steps
    assert points[-1]["value"] < points[0]["value"] * 0.5
    assert {"grad_norm", "learning_rate", "samples_per_second"} <= set(progress["metrics"])


def test_reporter_survives_the_server_being_down(real_server):
    client = real_server.client()
    client.submit_job({"name": "holder",
                       "command": "echo $HEADWAY_TOKEN; sleep 60",
                       "termination_grace": "1s"})
    assert wait_for(lambda: client.get_job("holder")["state"] == "Running", 20)
    token = ""
    log_dir = os.path.join(real_server.data, "jobs", "holder", "attempt-0")
    assert wait_for(lambda: os.path.exists(os.path.join(log_dir, "rank-0.log"))
                    and open(os.path.join(log_dir, "rank-0.log")).read().strip(), 20)
    token = open(os.path.join(log_dir, "rank-0.log")).read().strip()

    real_server.stop()
    reporter = headway.Reporter(url=real_server.url, job="holder", token=token, max_backoff=1.0,
                                env={})
    try:
        started = time.monotonic()
        for step in range(1, 2001):
            reporter.report(step, total_steps=2000, loss=1.0 / step)
        # Far below any network timeout: report() never waited for the dead server.
        assert time.monotonic() - started < 5
        assert reporter.flush(timeout=0.5) is False
        real_server.start()
        assert reporter.flush(timeout=30) is True
    finally:
        reporter.close()
    job = client.get_job("holder")
    assert job["progress"]["step"] == 2000
    client.stop_job("holder")


def test_client_finds_the_token_where_the_cli_does(real_server, tmp_path):
    """No token given: the Client reads the local server's admin token, as `headway` does;
    a config file's token comes before it, and the variables before both."""
    home = str(tmp_path)
    env = {"HEADWAY_SERVER": real_server.url, "HEADWAY_DATA_DIR": real_server.data, "HOME": home}
    c = headway.Client(env=env)
    assert c.token_source == os.path.join(real_server.data, "admin-token")
    assert c.list_jobs() == []

    # A config file's token (here a wrong one) is taken before the admin token, and a
    # refusal says where the token came from and where another may come from.
    config = os.path.join(home, ".config", "headway", "config")
    os.makedirs(os.path.dirname(config))
    with open(config, "w") as f:
        f.write("server: %s\ntoken: hwu_not-a-token\n" % real_server.url)
    os.chmod(config, 0o600)
    c = headway.Client(env={"HEADWAY_DATA_DIR": real_server.data, "HOME": home})
    assert c.url == real_server.url and c.token_source == config
    with pytest.raises(headway.HeadwayError) as refused:
        c.list_jobs()
    assert refused.value.status == 401
    assert "token from %s" % config in str(refused.value)
    assert "HEADWAY_API_TOKEN" in str(refused.value)

    c = headway.Client(env={"HEADWAY_API_TOKEN": real_server.token, "HOME": home})
    assert c.token_source == "HEADWAY_API_TOKEN"
    assert c.list_jobs() == []
