"""Reporter tests against the capture server (a test double of the progress endpoint,
not the real C++ server) and against dead servers (closed port, silent listener).

Timeouts below are hang guards only; no assertion depends on how fast a machine is.
"""

import json
import logging
import math
import re
import threading
import time

import pytest

import headway
from headway import reporter as reporter_mod
from capture_server import SilentServer, closed_port_url

RFC3339_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_single_report_is_delivered_with_url_auth_and_body(server, make_reporter):
    r = make_reporter(server.url, job="mnist/run 1", token="s3cret")
    before = time.time()
    r.report(1200, total_steps=10000, epoch=1.5, total_epochs=8, loss=0.41, lr=3e-4)
    assert r.flush(timeout=10) is True
    assert len(server.requests) == 1
    req = server.requests[0]
    assert req.method == "POST"
    assert req.path == "/api/v1/jobs/mnist%2Frun%201/progress"
    assert req.headers["authorization"] == "Bearer s3cret"
    assert req.headers["content-type"] == "application/json"
    body = req.json
    assert "reports" not in body  # one point: the single-report form
    assert body["step"] == 1200 and body["total_steps"] == 10000
    assert body["epoch"] == 1.5 and body["total_epochs"] == 8
    assert body["metrics"] == {"loss": 0.41, "lr": 3e-4}
    assert RFC3339_MS.match(body["time"])
    sent = time.mktime(time.strptime(body["time"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
    assert before - 1 <= sent <= time.time() + 1  # UTC time of the report() call
    assert r.stats()["sent"] == 1


def test_only_step_is_required(server, make_reporter):
    r = make_reporter(server.url)
    r.report(0)
    assert r.flush(10)
    assert set(server.requests[0].json) == {"step", "time"}


def test_url_path_prefix_is_kept(server, make_reporter):
    r = make_reporter(server.url + "/headway/")
    r.report(1)
    assert r.flush(10)
    assert server.requests[0].path == "/headway/api/v1/jobs/job-1/progress"


def test_points_reported_while_a_request_is_in_flight_are_batched(server, make_reporter):
    server.delay = 0.3  # the first request is slow: the rest queue up behind it
    r = make_reporter(server.url)
    for i in range(50):
        r.report(i, loss=float(i))
    assert r.flush(10)
    assert [p["step"] for p in server.points()] == list(range(50))
    assert len(server.requests) < 50
    assert any("reports" in q.json for q in server.requests)


def test_batches_respect_batch_size(server, make_reporter):
    server.delay = 0.2
    r = make_reporter(server.url, batch_size=10)
    for i in range(35):
        r.report(i)
    assert r.flush(10)
    assert [p["step"] for p in server.points()] == list(range(35))
    assert all(len(q.reports()) <= 10 for q in server.requests)


def test_interval_batches_without_a_slow_server(server, make_reporter):
    r = make_reporter(server.url, interval=30)
    for i in range(20):
        r.report(i)
    assert r.flush(10)  # flush() cuts the interval wait short
    assert len(server.requests) <= 2
    assert [p["step"] for p in server.points()] == list(range(20))


def test_non_finite_metrics_are_sent_as_strings(server, make_reporter):
    r = make_reporter(server.url)
    r.report(3, loss=float("nan"), up=math.inf, down=-math.inf, ok=1.0, n=7)
    assert r.flush(10)
    raw = server.requests[0].body.decode()
    assert "NaN" in raw and not re.search(r"[:\[,]\s*-?(NaN|Infinity)\b", raw)
    # capture_server parses strictly (bare NaN/Infinity would fail the parse)
    assert server.requests[0].json["metrics"] == {
        "loss": "NaN", "up": "Infinity", "down": "-Infinity", "ok": 1.0, "n": 7}


def test_numpy_like_scalars_and_bools_are_converted(server, make_reporter):
    class Scalar:  # stands in for a numpy scalar / 0-d tensor
        def __init__(self, v):
            self.v = v

        def item(self):
            return self.v

    r = make_reporter(server.url)
    r.report(Scalar(4), total_steps=Scalar(10), epoch=Scalar(0.5), loss=Scalar(0.25),
             done=True)
    assert r.flush(10)
    body = server.requests[0].json
    assert body["step"] == 4 and body["total_steps"] == 10 and body["epoch"] == 0.5
    assert body["metrics"] == {"loss": 0.25, "done": 1}


def test_invalid_values_are_logged_once_and_dropped(server, make_reporter, caplog):
    class Broken:
        def item(self):
            raise RuntimeError("boom")

    r = make_reporter(server.url)
    with caplog.at_level(logging.WARNING, logger="headway"):
        r.report(-1, loss=1.0)           # bad step: point dropped
        r.report("seven")                # bad step again: not logged again
        r.report(None)
        r.report(1, loss="high", acc=0.9, total_steps=-5, epoch=float("nan"))
        r.report(2, loss="high", weird=Broken(), empty=None)
    assert r.flush(10)
    pts = server.points()
    assert [p["step"] for p in pts] == [1, 2]
    assert pts[0]["metrics"] == {"acc": 0.9}
    assert "total_steps" not in pts[0] and "epoch" not in pts[0]
    assert "metrics" not in pts[1]
    msgs = [rec.getMessage() for rec in caplog.records]
    assert sum("invalid step" in m for m in msgs) == 1
    assert sum("'loss'" in m for m in msgs) == 1
    assert r.stats()["dropped_invalid"] == 3


def test_metric_names_may_be_anything_but_reserved(server, make_reporter):
    r = make_reporter(server.url)
    r.report(1, **{"self": 1.0, "eval/loss": 2.0, "time": 3.0})
    assert r.flush(10)
    assert server.requests[0].json["metrics"] == {"self": 1.0, "eval/loss": 2.0, "time": 3.0}


@pytest.mark.parametrize("env,enabled", [
    ({"RANK": "1"}, False),
    ({"RANK": "0", "LOCAL_RANK": "1"}, True),   # RANK wins over LOCAL_RANK
    ({"LOCAL_RANK": "2"}, False),
    ({"RANK": "0"}, True),
    ({"RANK": ""}, True),
])
def test_rank_gating(server, make_reporter, env, enabled):
    r = make_reporter(server.url, env=env)
    assert r.enabled is enabled
    r.report(1, loss=1.0)
    assert r.flush(10) is True
    if enabled:
        assert len(server.requests) == 1
    else:
        assert r._thread is None and server.requests == []


def test_all_ranks_reports_from_rank_1(server, make_reporter):
    r = make_reporter(server.url, env={"RANK": "1"}, all_ranks=True)
    r.report(1)
    assert r.flush(10) and len(server.requests) == 1


def test_reads_configuration_from_environment(server):
    r = headway.Reporter(env={"HEADWAY_URL": server.url, "HEADWAY_JOB": "envjob",
                              "HEADWAY_TOKEN": "envtok"}, interval=0)
    try:
        r.report(1)
        assert r.flush(10)
        assert server.requests[0].path == "/api/v1/jobs/envjob/progress"
        assert server.requests[0].headers["authorization"] == "Bearer envtok"
    finally:
        r.close(0)


def test_without_environment_report_is_a_no_op(clean_default):
    r = headway.Reporter(env={})
    assert r.enabled is False
    r.report(1, loss=1.0)
    assert r._thread is None and r.stats()["reported"] == 0
    assert r.flush(0) is True
    # the module-level API too, with the real (cleaned) os.environ
    headway.report(1, loss=1.0)
    assert headway.flush(timeout=0) is True
    d = reporter_mod.default_reporter()
    assert d.enabled is False and d._thread is None


def test_bad_url_disables_reporting(caplog):
    with caplog.at_level(logging.WARNING, logger="headway"):
        r = headway.Reporter(url="localhost:8080", job="j", env={})
    assert r.enabled is False
    r.report(1)
    assert any("bad HEADWAY_URL" in rec.getMessage() for rec in caplog.records)


def test_module_level_api_uses_environment(server, clean_default):
    clean_default.setenv("HEADWAY_URL", server.url)
    clean_default.setenv("HEADWAY_JOB", "modjob")
    clean_default.setenv("HEADWAY_TOKEN", "t")
    headway.init(interval=0)
    headway.report(5, total_steps=10, loss=0.5)
    assert headway.flush(timeout=10) is True
    assert server.requests[0].path == "/api/v1/jobs/modjob/progress"
    assert server.requests[0].json["metrics"] == {"loss": 0.5}


def test_silent_server_never_blocks_report_and_queue_stays_bounded(make_reporter):
    # The listener completes TCP handshakes but never reads or answers, so the sender
    # thread sits inside a request for request_timeout (30 s) while we keep reporting.
    silent = SilentServer()
    try:
        r = make_reporter(silent.url, max_queue=100, request_timeout=30)
        for i in range(10_000):
            r.report(i, total_steps=10_000 if i == 5_000 else None, loss=float(i))
        # every call returned (we got here) while the sender is stuck in one request
        assert r._thread is not None and r._thread.is_alive()
        r._drain()  # what the sender would do on its next wake
        with r._lock:
            queued = [p for _, p in r._queue]
            inflight = r._inflight
        assert len(queued) == 100 and 1 <= inflight <= 500
        assert queued[-1]["step"] == 9_999  # the latest point is kept
        steps = [p["step"] for p in queued]
        assert steps == list(range(9_900, 10_000))  # oldest dropped first
        assert queued[0]["total_steps"] == 10_000  # carried over from dropped points
        assert r.stats()["dropped_coalesced"] >= 9_000
        t0 = time.monotonic()
        assert r.flush(timeout=0.3) is False
        assert time.monotonic() - t0 < 10  # hang guard: flush honours its timeout
        sender = r._thread
        assert r.close(timeout=0) is False
        sender.join(10)
        assert not sender.is_alive()  # close() unblocked the stuck request
    finally:
        silent.close()


def test_connection_refused_is_retried_and_flush_times_out(make_reporter):
    r = make_reporter(closed_port_url(), max_queue=50)
    for i in range(1000):
        r.report(i)
    t0 = time.monotonic()
    assert r.flush(timeout=0.5) is False
    elapsed = time.monotonic() - t0
    assert 0.4 <= elapsed < 10  # waited for its timeout, and no hang
    s = r.stats()
    assert s["failures"] >= 1 and s["sent"] == 0 and s["queued"] <= 50


def test_points_reported_during_an_outage_arrive_coalesced_after_recovery(
        server, make_reporter):
    server.script(503, times=3)
    r = make_reporter(server.url, max_queue=5)
    for i in range(100):
        r.report(i, total_steps=100)
    assert r.flush(timeout=10) is True
    acked = [p["step"] for p in server.acked_points()]
    assert acked[-1] == 99                    # the latest point got through
    assert acked == sorted(acked) and len(acked) <= 5 + 1  # bounded by max_queue
    assert all(p["total_steps"] == 100 for p in server.acked_points())


def test_5xx_is_retried(server, make_reporter):
    server.script(500, times=2)
    r = make_reporter(server.url)
    r.report(7, loss=1.0)
    assert r.flush(timeout=10) is True
    assert len(server.requests) == 3
    assert all(q.json["step"] == 7 for q in server.requests)
    assert r.stats()["failures"] == 2


def test_429_is_retried_honouring_retry_after(server, make_reporter):
    server.script(429, times=1, headers={"Retry-After": "0"})
    r = make_reporter(server.url)
    r.report(1)
    assert r.flush(timeout=10) is True
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_4xx_is_not_retried(server, make_reporter, status, caplog):
    server.script(status)
    r = make_reporter(server.url)
    with caplog.at_level(logging.WARNING, logger="headway"):
        r.report(1)
        assert r.flush(timeout=10) is False  # rejected, not acknowledged
    assert len(server.requests) == 1
    assert r.stats()["dropped_rejected"] == 1
    assert any("rejected" in rec.getMessage() for rec in caplog.records)
    # the reporter keeps working for later points
    r.report(2)
    assert r.flush(timeout=10) is True
    assert len(server.requests) == 2 and server.requests[1].json["step"] == 2


def test_keep_alive_connection_is_reused(server, make_reporter):
    r = make_reporter(server.url)
    for i in range(3):
        r.report(i)
        assert r.flush(10)
    assert len(server.requests) == 3
    assert len({q.client for q in server.requests}) == 1  # one TCP connection


def test_thread_safe_reporting_from_many_threads(server, make_reporter):
    r = make_reporter(server.url, max_queue=100_000)
    n_threads, per = 8, 500

    def work(t):
        for i in range(per):
            r.report(t * per + i, thread=t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert r.flush(timeout=20) is True
    steps = sorted(p["step"] for p in server.points())
    assert steps == list(range(n_threads * per))


def test_report_never_waits_for_the_reporters_lock(server, make_reporter):
    # The sender and flush() take the lock; the training loop's report() never does.
    r = make_reporter(server.url)
    r.report(0)
    assert r.flush(10)
    with r._lock:
        loop = threading.Thread(target=lambda: [r.report(i) for i in range(1, 100)])
        loop.start()
        loop.join(5)
        assert not loop.is_alive()
    assert r.flush(10)
    assert [p["step"] for p in server.points()] == list(range(100))


def test_a_point_reported_while_the_lock_is_held_is_still_sent(server, make_reporter):
    r = make_reporter(server.url)
    with r._lock:  # the first report() cannot start the sender now
        r.report(1, loss=0.5)
    assert r.flush(10)  # ... flush() does
    r.report(2)
    time.sleep(0.2)
    with r._lock:  # the idle sender is not woken by this one; it looks again by itself
        r.report(3)
    deadline = time.monotonic() + 5
    while len(server.points()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p["step"] for p in server.points()] == [1, 2, 3]


def test_close_stops_reporting(server, make_reporter):
    r = make_reporter(server.url)
    r.report(1)
    assert r.close(timeout=10) is True
    r.report(2)
    assert [p["step"] for p in server.points()] == [1]
    assert r.close(timeout=0) is True  # idempotent


def test_rfc3339_format():
    assert reporter_mod.rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert reporter_mod.rfc3339(1796205600.1239) == "2026-12-02T10:00:00.123Z"


def test_server_limits_are_enforced_per_point(server, make_reporter, caplog):
    # src/core/progress_report.h rejects a whole request for one bad metric name, more
    # than 256 metrics or total_steps < 1; the reporter drops just the offending field.
    r = make_reporter(server.url)
    with caplog.at_level(logging.WARNING, logger="headway"):
        r.report(1, total_steps=0, **{"eval loss": 1.0, "ok.name/x-1": 2.0, "": 3.0,
                                      "x" * 129: 4.0})
        r.report(2, **{"m%d" % i: float(i) for i in range(300)})
    assert r.flush(10)
    p1, p2 = server.points()
    assert p1["metrics"] == {"ok.name/x-1": 2.0} and "total_steps" not in p1
    assert len(p2["metrics"]) == 256 and p2["metrics"]["m0"] == 0.0
    assert any("'eval loss'" in rec.getMessage() for rec in caplog.records)


def test_400_on_a_batch_is_bisected_to_the_refused_point(server, make_reporter):
    server.delay = 0.05
    r = make_reporter(server.url, interval=30)  # everything goes in one batch on flush
    r.report(0)
    assert r.flush(10)
    for i in range(1, 9):
        r.report(i)
    server.delay = 0
    # the next request (the 8-point batch) and, while bisecting, each request that still
    # holds step 5 are refused; everything else is accepted
    refused = {"n": 0}
    orig = server._answer

    def answer(rec):
        if any(p["step"] == 5 for p in rec.reports()):
            refused["n"] += 1
            return 400, {"error": {"code": "InvalidArgument", "message": "no"}}, {}
        return orig(rec)

    server._answer = answer
    assert r.flush(10) is False  # one point was refused
    acked = sorted(p["step"] for p in server.acked_points())
    assert acked == [0, 1, 2, 3, 4, 6, 7, 8]
    assert refused["n"] == 4  # 8 -> 4 -> 2 -> 1 points
    assert r.stats()["dropped_rejected"] == 1


def test_413_splits_the_batch(server, make_reporter):
    server.delay = 0.05
    r = make_reporter(server.url, interval=30)
    r.report(0)
    assert r.flush(10)
    server.delay = 0
    for i in range(1, 11):
        r.report(i)
    server.script(413)
    assert r.flush(10) is True
    assert sorted(p["step"] for p in server.acked_points()) == list(range(11))
    assert len(server.requests[1].reports()) == 10
    assert all(len(q.reports()) <= 5 for q in server.requests[2:])


def test_large_batches_are_split_before_sending(server, make_reporter):
    r = make_reporter(server.url, interval=30)
    metrics = {"metric_%03d" % i: 1.0 / (i + 1) for i in range(256)}
    r.report(0)
    assert r.flush(10)
    for i in range(1, 201):  # about 200 x 8 KiB: above the server's 1 MiB as one body
        r.report(i, **metrics)
    assert r.flush(20) is True
    assert all(len(q.body) <= reporter_mod.MAX_BODY_BYTES for q in server.requests)
    assert sorted(p["step"] for p in server.acked_points()) == list(range(201))
