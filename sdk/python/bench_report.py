#!/usr/bin/env python3
"""Micro-benchmark: cost of headway.report() per call, with the C intake where the build
tree has it (build/python) and with the Python intake, vs. one synchronous urllib POST per
point, all against a local capture server (http.server on 127.0.0.1, a stand-in for the
Headway progress endpoint, not the real server). Back to back, in a loop that does
nothing else: bench_torch_loop.py measures the call inside a training loop. Prints
figures; asserts nothing.

    /usr/bin/python3 sdk/python/bench_report.py [--points N] [--sync-points M]
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "python"))
sys.path.insert(0, HERE)
import headway  # noqa: E402
from headway import reporter as reporter_mod  # noqa: E402


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    received = 0

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        doc = json.loads(body)
        _Handler.received += len(doc["reports"]) if "reports" in doc else 1
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--sync-points", type=int, default=1_000)
    a = ap.parse_args()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d" % httpd.server_address[1]

    intakes = {"C intake": reporter_mod.Intake, "Python intake": reporter_mod.PyIntake}
    if reporter_mod.Intake is reporter_mod.PyIntake:
        del intakes["C intake"]  # not built
    timings = {}
    for name, intake in intakes.items():
        reporter_mod.Intake = intake
        r = headway.Reporter(url=url, job="bench", token="t", env={})
        r.report(0, loss=1.0)
        r.flush(10)  # warm up: thread and connection started
        n = a.points
        t0 = time.perf_counter()
        worst = 0.0
        for i in range(1, n + 1):
            s = time.perf_counter()
            r.report(i, total_steps=n, epoch=i / n, loss=1.0 / i, learning_rate=3e-4)
            worst = max(worst, time.perf_counter() - s)
        loop = time.perf_counter() - t0
        ok = r.flush(30)
        drained = time.perf_counter() - t0
        timings[name] = (loop / n * 1e6, worst, ok, drained, r.stats())
        r.close(1)

    m = a.sync_points
    req_url = url + "/api/v1/jobs/bench/progress"
    t0 = time.perf_counter()
    for i in range(m):
        body = json.dumps({"step": i, "metrics": {"loss": 1.0 / (i + 1)}}).encode()
        req = urllib.request.Request(req_url, data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": "Bearer t"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
    sync_us = (time.perf_counter() - t0) / m * 1e6
    httpd.shutdown()

    for name, (async_us, worst, ok, drained, st) in timings.items():
        print("report(), %-14s %8.2f us/call  (%d calls, worst single call %.1f us)"
              % (name + ":", async_us, n, worst * 1e6))
        print("  background delivery:   flush ok=%s, %d points in %d requests, "
              "%d coalesced, all drained %.2f s after start"
              % (ok, st["sent"], st["requests"], st["dropped_coalesced"], drained))
    print("sync urllib POST/point:  %8.2f us/call  (%d calls)" % (sync_us, m))
    for name, (async_us, *_) in timings.items():
        print("ratio sync/report(), %s: %.1fx" % (name, sync_us / async_us))


if __name__ == "__main__":
    main()
