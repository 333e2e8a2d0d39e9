"""Code written for Kubeflow Trainer reports to a real `headway` server unchanged: a job
shaped like HF Transformers' KubeflowCallback (kubeflow_callback_job.py) goes through
train, eval and end, with a metric name that has spaces, over HTTP and over HTTPS
(server started with --tls-cert; the job verifies it with KUBEFLOW_TRAINER_SERVER_CA_CERT).
Standard library only. Needs HEADWAY_BIN (scripts/test sets it) and openssl for HTTPS."""

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

BIN = os.environ.get("HEADWAY_BIN")
HERE = os.path.dirname(os.path.abspath(__file__))
JOB_SCRIPT = os.path.join(HERE, "kubeflow_callback_job.py")

pytestmark = pytest.mark.skipif(not BIN, reason="HEADWAY_BIN is not set (scripts/test sets it)")


class Server:
    def __init__(self, tmp, tls):
        self.tmp = tmp
        self.data = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "server.log")
        self.context = None
        args = []
        if tls:
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=headway-test",
                            "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True)
            args = ["--tls-cert", cert, "--tls-key", key]
            self.context = ssl.create_default_context(cafile=cert)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:0", "--data-dir",
                                      self.data, "--gpus", "1"] + args, stdout=log, stderr=log)
        deadline = time.time() + 20
        self.url = None
        while time.time() < deadline and self.url is None:
            with open(self.log_path) as f:
                m = re.findall(r"listening on (https?://127\.0\.0\.1:\d+)", f.read())
            if m:
                self.url = m[-1]
            else:
                time.sleep(0.05)
        assert self.url, open(self.log_path).read()
        with open(os.path.join(self.data, "admin-token")) as f:
            self.token = f.read().strip()

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.context) as resp:
                raw = resp.read().decode()
                status = resp.status
        except urllib.error.HTTPError as e:
            raw, status = e.read().decode(), e.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        marker = ("shim " + os.path.join(self.data, "jobs") + "/").encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if marker in f.read().replace(b"\0", b" "):
                        os.killpg(int(pid), signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture(params=["http", "https"])
def server(request):
    if request.param == "https" and not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        srv = Server(tmp, tls=request.param == "https")
        yield srv
        srv.close()


def wait_for(predicate, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def test_a_kubeflow_callback_reports_train_eval_and_end(server):
    status, job = server.call("POST", "/api/v1/jobs", {
        "name": "hf-kubeflow", "command": ["/usr/bin/python3", "-u", JOB_SCRIPT],
        "time_limit": "2m"})
    assert status == 201, job

    def finished():
        return server.call("GET", "/api/v1/jobs/hf-kubeflow")[1]["state"] in (
            "Succeeded", "Failed", "Stopped")

    assert wait_for(finished)
    _, job = server.call("GET", "/api/v1/jobs/hf-kubeflow")
    _, logs = server.call("GET", "/api/v1/jobs/hf-kubeflow/logs")
    assert job["state"] == "Succeeded", (job, logs)
    statuses = re.search(r"STATUSES ([0-9 ]+)", str(logs)).group(1).split()
    assert len(statuses) == 42 and set(statuses) == {"200"}, logs  # begin, 40 steps, end

    progress = job["progress"]
    assert progress["step"] == 40
    assert progress["total_steps"] == 40
    assert progress["percent"] == 100.0
    assert progress["epoch"] == 2.0
    metrics = progress["metrics"]
    assert metrics["eval_f1 (macro)"] == pytest.approx(0.9)
    assert metrics["train_loss"] == 0.3
    assert "eval_is_best" not in metrics  # "True": accepted, not a number
    for name in ("current_step", "total_steps", "current_epoch", "epoch"):
        assert name not in metrics  # the step, total and epoch, not series

    def count(metric):
        path = "/api/v1/jobs/hf-kubeflow/metrics/" + urllib.parse.quote(metric)
        return server.call("GET", path)[1]["count"]

    # The callback re-sends its last values with every update: only new ones are points.
    assert count("eval_f1 (macro)") == 2
    assert count("eval_loss") == 2
    assert count("loss") == 8
    _, events = server.call("GET", "/api/v1/jobs/hf-kubeflow/events")
    assert not [e for e in events["events"] if "Plateaued" in e.get("message", "")], events
