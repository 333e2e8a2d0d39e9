"""Client against the capture server (a test double of the Headway REST API, not the
real server): URLs, query strings, auth, bodies, error mapping and retries."""

import pytest

from headway import Client, HeadwayError
from capture_server import SilentServer, closed_port_url

JOB = {"name": "mnist", "team": "vision", "state": "Running", "health": "Progressing",
       "reason": "", "exit_code": None, "gpus": 1, "created_at": "2026-12-02T10:00:00Z",
       "progress": {"percent": 42.0, "step": 4200, "total_steps": 10000, "epoch": 1.2,
                    "eta_seconds": 360.5, "steps_per_second": 12.1,
                    "last_report_at": "2026-12-02T10:05:00Z", "metrics": {"loss": 0.41}}}


@pytest.fixture
def client(server):
    c = Client(server.url, token="user-tok", retries=2, backoff=0.01, env={})
    yield c
    c.close()


def test_list_jobs_with_filters(server, client):
    server.route("GET", "/api/v1/jobs", 200, {"jobs": [JOB]})
    jobs = client.list_jobs(state="Running", team="vision",
                            label={"sweep": "lr", "owner": "ana"})
    assert jobs == [JOB]
    req = server.requests[0]
    assert req.method == "GET" and req.path == "/api/v1/jobs"
    assert req.query == {"state": ["Running"], "team": ["vision"],
                         "label": ["sweep=lr,owner=ana"]}  # openapi: key=value[,k2=v2]
    assert req.headers["authorization"] == "Bearer user-tok"
    client.list_jobs(label="k=v", active=True)
    client.list_jobs(label=["a=1", "b=2"])
    client.list_jobs()
    assert server.requests[1].query == {"label": ["k=v"], "active": ["true"]}
    assert server.requests[2].query == {"label": ["a=1,b=2"]}
    assert server.requests[3].target == "/api/v1/jobs"


def test_get_job(server, client):
    server.route("GET", "/api/v1/jobs/mnist", 200, JOB)
    job = client.get_job("mnist")
    assert job["progress"]["eta_seconds"] == 360.5 and job["exit_code"] is None


def test_submit_job(server, client):
    spec = {"name": "mnist", "team": "vision", "command": ["python", "train.py"], "gpus": 1}
    server.route("POST", "/api/v1/jobs", 201, dict(JOB, state="Queued"))
    job = client.submit_job(spec)
    assert job["state"] == "Queued"
    req = server.requests[0]
    assert req.method == "POST" and req.json == spec
    assert req.headers["content-type"] == "application/json"


def test_submit_yaml_text_with_submit_dir(server, client):
    server.route("POST", "/api/v1/jobs", 201, dict(JOB, state="Queued"))
    text = "name: mnist\ncommand: python train.py\n"
    client.submit_job(text, submit_dir="/home/ana/proj")
    req = server.requests[0]
    assert req.body == text.encode() and req.headers["content-type"] == "application/yaml"
    assert req.headers["x-headway-submit-dir"] == "/home/ana/proj"


def test_stop_job_quotes_the_name(server, client):
    server.route("POST", "/api/v1/jobs/a%20b/stop", 200, dict(JOB, state="Stopped"))
    assert client.stop_job("a b")["state"] == "Stopped"
    assert server.requests[0].path == "/api/v1/jobs/a%20b/stop"
    assert server.requests[0].body == b""
    client.stop_job("a b", reason="diverged")
    assert server.requests[1].json == {"reason": "diverged"}


def test_get_metric_and_events(server, client):
    server.route("GET", "/api/v1/jobs/mnist/metrics/loss", 200,
                 {"metric": "loss", "points": [{"step": 1, "value": 0.5}]})
    server.route("GET", "/api/v1/jobs/mnist/events", 200,
                 {"events": [{"time": "t", "type": "Started", "message": "m"}]})
    assert client.get_metric("mnist", "loss", buckets=50) == [{"step": 1, "value": 0.5}]
    assert server.requests[0].query == {"buckets": ["50"]}
    assert client.get_metric("mnist", "loss") == [{"step": 1, "value": 0.5}]
    assert server.requests[1].query == {}
    assert client.get_events("mnist")[0]["type"] == "Started"
    client.get_events("mnist", after=7)
    assert server.requests[-1].query == {"after": ["7"]}


def test_get_metric_returns_the_buckets_of_a_downsampled_series(server, client):
    buckets = [{"first_step": 1, "last_step": 10, "min": 0.4, "max": 2.0, "last": 0.5,
                "count": 10, "non_finite": False},
               {"first_step": 11, "last_step": 20, "min": 0.3, "max": 0.5, "last": "NaN",
                "count": 10, "non_finite": True}]
    server.route("GET", "/api/v1/jobs/mnist/metrics/loss", 200,
                 {"metric": "loss", "count": 20, "buckets": buckets})
    got = client.get_metric("mnist", "loss", buckets=2)
    assert [(p["step"], p["value"]) for p in got] == [(10, 0.5), (20, "NaN")]
    assert got[0]["min"] == 0.4 and got[0]["max"] == 2.0 and got[1]["non_finite"] is True


def test_4xx_raises_headway_error_without_retry(server, client):
    server.route("GET", "/api/v1/jobs/nope", 404,
                 {"error": {"code": "NotFound", "message": "job nope not found"}})
    with pytest.raises(HeadwayError) as ei:
        client.get_job("nope")
    e = ei.value
    assert (e.status, e.code, e.message, e.field) == (404, "NotFound", "job nope not found",
                                                      None)
    assert len(server.requests) == 1
    server.script(400, {"error": {"code": "InvalidArgument", "message": "bad",
                                  "field": "resources.gpus_per_process", "line": 4}})
    with pytest.raises(HeadwayError) as ei:
        client.submit_job({"name": "x"})
    assert ei.value.field == "resources.gpus_per_process" and "field" in str(ei.value)


def test_error_without_json_body(server, client):
    server.script(400, doc="plain")
    with pytest.raises(HeadwayError) as ei:
        client.get_job("x")
    assert ei.value.status == 400 and ei.value.code == "InvalidArgument"


def test_get_5xx_is_retried(server, client):
    server.route("GET", "/api/v1/jobs/mnist", 200, JOB)
    server.script(503, times=2)
    assert client.get_job("mnist")["name"] == "mnist"
    assert len(server.requests) == 3


def test_get_gives_up_after_retries(server, client):
    server.script(500, times=5)
    with pytest.raises(HeadwayError) as ei:
        client.list_jobs()
    assert ei.value.status == 500 and len(server.requests) == 3


def test_post_is_not_retried(server, client):
    server.script(503)
    with pytest.raises(HeadwayError) as ei:
        client.submit_job({"name": "x"})
    assert ei.value.status == 503 and len(server.requests) == 1


def test_connection_refused_raises_unavailable():
    c = Client(closed_port_url(), retries=1, backoff=0.01, env={})
    with pytest.raises(HeadwayError) as ei:
        c.list_jobs()
    assert ei.value.status is None and ei.value.code == "Unavailable"


def test_timeout_raises_unavailable():
    silent = SilentServer()
    try:
        c = Client(silent.url, timeout=0.2, retries=0, env={})
        with pytest.raises(HeadwayError) as ei:
            c.get_job("x")
        assert ei.value.code == "Unavailable"
    finally:
        silent.close()


def test_url_and_token_resolution(server):
    c = Client(env={"HEADWAY_SERVER": server.url, "HEADWAY_URL": "http://bad.invalid:1",
                    "HEADWAY_USER_TOKEN": "from-env"})
    server.route("GET", "/api/v1/jobs", 200, {"jobs": []})
    assert c.list_jobs() == []
    assert server.requests[0].headers["authorization"] == "Bearer from-env"
    c.close()
    assert Client(env={"HEADWAY_URL": "http://h:1"}).url == "http://h:1"
    assert Client(env={}).url == "http://127.0.0.1:8080"
    assert Client("http://x:2", env={"HEADWAY_SERVER": "http://y:3"}).url == "http://x:2"
    c2 = Client(server.url, env={})
    c2.list_jobs()
    c2.close()
    assert "authorization" not in server.requests[1].headers
    # HEADWAY_API_TOKEN, the CLI's name, works too, and wins over HEADWAY_USER_TOKEN.
    c3 = Client(server.url, env={"HEADWAY_API_TOKEN": "api", "HEADWAY_USER_TOKEN": "user"})
    c3.list_jobs()
    c3.close()
    assert server.requests[2].headers["authorization"] == "Bearer api"
    c4 = Client(server.url, env={"HEADWAY_API_TOKEN": "cli-name"})
    c4.list_jobs()
    c4.close()
    assert server.requests[3].headers["authorization"] == "Bearer cli-name"
