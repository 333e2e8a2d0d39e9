"""Debian's real JupyterHub 3 (with its configurable-http-proxy and the dummy
authenticator) spawning a user's server onto a real Headway server with HeadwaySpawner:
reached through the hub's proxy, kept across a hub restart, stopped from the hub."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from test_real_server import BIN, SDK, RealServer, wait_for

pytestmark = [
    pytest.mark.skipif(not BIN, reason="HEADWAY_BIN is not set (scripts/test sets it)"),
    pytest.mark.skipif(not os.path.exists("/usr/bin/jupyterhub"),
                       reason="Debian's jupyterhub is not installed (scripts/setup --test does)"),
]

HUB_TOKEN = "test-service-token-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, method="GET", token=HUB_TOKEN, body=None, auth="token"):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("Authorization", "%s %s" % (auth, token))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            text = answer.read().decode()
            return answer.status, (json.loads(text) if text.strip().startswith(("{", "[")) else text)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, None


class Hub:
    def __init__(self, tmp, headway_url, headway_token):
        self.tmp = tmp
        self.proxy_port, self.hub_port, self.api_port = free_port(), free_port(), free_port()
        self.url = "http://127.0.0.1:%d" % self.proxy_port
        self.log_path = os.path.join(tmp, "jupyterhub.log")
        self.proc = None
        with open(os.path.join(tmp, "jupyterhub_config.py"), "w") as f:
            f.write("""
c = get_config()  # noqa
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {proxy_port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.pid_file = "{tmp}/proxy.pid"
c.JupyterHub.db_url = "sqlite:///{tmp}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{tmp}/cookie_secret"
c.JupyterHub.pid_file = "{tmp}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.cleanup_servers = False
c.JupyterHub.spawner_class = "headway.jupyterhub.HeadwaySpawner"
c.HeadwaySpawner.headway_url = "{headway_url}"
c.HeadwaySpawner.headway_token = "{headway_token}"
c.HeadwaySpawner.poll_interval = 0.25
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 60
c.JupyterHub.services = [{{"name": "tester", "api_token": "{hub_token}"}}]
c.JupyterHub.load_roles = [{{"name": "tester", "services": ["tester"],
    "scopes": ["admin:users", "admin:servers", "access:servers"]}}]
""".format(proxy_port=self.proxy_port, hub_port=self.hub_port, api_port=self.api_port, tmp=tmp,
           headway_url=headway_url, headway_token=headway_token, hub_token=HUB_TOKEN))

    def start(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = SDK
        # configurable-http-proxy's modules are Debian's, whatever Node.js runs it.
        env["NODE_PATH"] = "/usr/share/nodejs"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", "-m", "jupyterhub", "-f",
             os.path.join(self.tmp, "jupyterhub_config.py")],
            cwd=self.tmp, env=env, stdout=log, stderr=log, start_new_session=True)
        assert wait_for(lambda: self.api("/")[0] == 200, timeout=60), self.log()

    def api(self, path, method="GET", body=None):
        return call(self.url + "/hub/api" + path, method=method, body=body)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-6000:]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)

    def stop_proxy(self):
        try:
            with open(os.path.join(self.tmp, "proxy.pid")) as f:
                os.kill(int(f.read().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def server_env(name):
    """`name` in the environment of the running single-user server (tests run as root)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if b"jupyterhub.singleuser" not in f.read():
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                for entry in f.read().split(b"\0"):
                    key, _, value = entry.partition(b"=")
                    if key.decode() == name:
                        return value.decode()
        except OSError:
            pass
    return None


def test_jupyterhub_spawns_onto_headway_and_its_server_survives_a_hub_restart():
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        headway = RealServer(tmp, "--jupyterhub-spawner", "spawner").start()
        hub = None
        try:
            client = headway.client()
            status, created = call(headway.url + "/api/v1/tokens", "POST", headway.token,
                                   {"name": "spawner", "team": "research", "role": "member"},
                                   auth="Bearer")
            assert status == 201, created
            spawner_token = created["token"]
            # Another member of the team may not start a server in a hub user's name.
            status, created = call(headway.url + "/api/v1/tokens", "POST", headway.token,
                                   {"name": "mallory", "team": "research", "role": "member"},
                                   auth="Bearer")
            assert status == 201, created
            status, refused = call(headway.url + "/api/v1/notebooks", "POST", created["token"],
                                   {"name": "hub-alice", "jupyterhub": {"user": "alice"}},
                                   auth="Bearer")
            assert status == 403, refused
            assert "--jupyterhub-spawner" in refused

            hub = Hub(tmp, headway.url, spawner_token)
            hub.start()
            assert hub.api("/users/alice", "POST")[0] in (201, 409)
            began = time.monotonic()
            assert hub.api("/users/alice/server", "POST")[0] in (201, 202), hub.log()

            def ready():
                status, user = hub.api("/users/alice")
                return status == 200 and user["servers"].get("", {}).get("ready")
            assert wait_for(ready, timeout=120), hub.log()
            spawn_seconds = time.monotonic() - began
            print("\nspawn to ready through JupyterHub: %.1f s" % spawn_seconds)

            # Reached through the hub's proxy, with the hub's authorization.
            status, info = call(hub.url + "/user/alice/api/status")
            assert status == 200, (status, info, hub.log())
            # A notebook on Headway's pool, in the spawner's team, with the hub user's home.
            notebook = client.get_notebook("hub-alice")
            assert notebook["state"] == "Running" and notebook["ready"]
            assert notebook["team"] == "research"
            assert notebook["jupyterhub_user"] == "alice"
            job = client.get_job(notebook["job"])
            assert job["state"] == "Running"
            # The hub's token reached the server, and is in no spec, listing or log.
            hub_token = server_env("JUPYTERHUB_API_TOKEN")
            assert hub_token
            logs = subprocess.run([BIN, "logs", notebook["job"], "--server", headway.url,
                                   "--token", headway.token], capture_output=True, text=True)
            for text in (json.dumps(job), json.dumps(notebook), logs.stdout, logs.stderr):
                assert hub_token not in text
            # Nor does Headway's own proxy serve it: the hub's login guards it.
            status, _ = call(headway.url + "/notebooks/hub-alice/api/status", token=headway.token,
                             auth="Bearer")
            assert status == 409

            # The hub restarts; the server goes on and the hub finds it again.
            hub.stop()
            hub.stop_proxy()
            assert client.get_job(notebook["job"])["state"] == "Running"
            hub.start()
            assert wait_for(ready, timeout=60), hub.log()
            assert wait_for(lambda: call(hub.url + "/user/alice/api/status")[0] == 200,
                            timeout=60), hub.log()
            assert client.get_notebook("hub-alice")["job"] == notebook["job"], "not restarted"

            # Stopped from the hub: the notebook stops, its job ends.
            assert hub.api("/users/alice/server", "DELETE")[0] in (202, 204)
            assert wait_for(lambda: not hub.api("/users/alice")[1]["servers"], timeout=60)
            assert client.get_notebook("hub-alice")["state"] == "Stopped"
            assert wait_for(lambda: client.get_job(notebook["job"])["state"] == "Stopped",
                            timeout=60)
        finally:
            if hub:
                hub.stop()
                hub.stop_proxy()
            headway.stop()
            headway.end_jobs()


def test_the_spawn_page_says_where_a_queued_server_stands():
    spawner = pytest.importorskip("headway.jupyterhub")
    import datetime
    now = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.timezone.utc)
    first = {"pending_reason": "waiting for 1 GPU (0 of 4 free)", "queue_position": 1,
             "expected_start": "2026-12-04T12:12:00.000Z"}
    assert spawner.queued_message(first, now) == (
        "Queued on the GPU pool (next in line, expected to start in about 12 min): "
        "waiting for 1 GPU (0 of 4 free)")
    third = {"pending_reason": "waiting for 1 GPU (0 of 4 free)", "queue_position": 3,
             "expected_start": None}
    assert spawner.queued_message(third, now) == (
        "Queued on the GPU pool (number 3 in line): waiting for 1 GPU (0 of 4 free)")
    assert spawner.queued_message({}, now) == "Queued on the GPU pool: waiting in the queue"
