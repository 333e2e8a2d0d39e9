#!/usr/bin/env python3
"""What headway.report() costs a real PyTorch training loop.

A small MLP trains on CPU with steps of about --step-ms milliseconds. The same loop runs
without reporting and with one report() per step (loss as a 0-d tensor, learning rate,
epoch, total steps), alternating, --rounds times. Printed: the time inside report() per
call in the loop (median and p99 of every call), and steps/s with and without it. After
a training step any call starts with cold caches, so the calls are measured beside an
empty Python function's and a disabled reporter's (the C intake returning at once: the
floor under every call through it, the clock reads that time it included). Rows: this
SDK with its C intake where the build tree has it (build/python), the same with its
Python intake, and with --baseline-sdk another SDK. On a shared 2-core machine the
steps/s differ by +-2% between identical loops: the call times resolve far finer. The
reports go to a capture server on 127.0.0.1 in a process of its own (http.server, a
stand-in for Headway's progress endpoint: the sender thread's work is the same, the
server's is not measured here).

    /usr/bin/python3 sdk/python/bench_torch_loop.py [--steps N] [--rounds R] [--step-ms MS]
    /usr/bin/python3 sdk/python/bench_torch_loop.py --baseline-sdk /path/to/other/sdk/python

Asserts nothing: a benchmark, not a test.
"""

import argparse
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        json.loads(body)
        self.send_response(202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


class _EmptyReporter:
    """A report() that does nothing, with the same signature: what calling any function
    costs right after a training step (cold caches), the floor under every reporter."""

    def report(self, step, *, total_steps=None, epoch=None, total_epochs=None, **metrics):
        pass

    def flush(self, timeout=None):
        return True

    def stats(self):
        return {"sent": 0}

    def close(self, timeout=None):
        return True


def _load_sdk(name, directory):
    """The headway package in `directory`, imported as module `name`."""
    path = os.path.join(directory, "headway", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[os.path.dirname(path)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=500, help="steps per loop")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--baseline-sdk", default=None,
                    help="another sdk/python directory to measure in the same rounds")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    # The SDK's compiled intake, where the build tree has it (see sdk/python/CMakeLists.txt).
    built = os.path.join(os.path.dirname(os.path.dirname(here)), "build", "python")
    if os.path.isdir(built):
        sys.path.insert(0, built)
    sdks = {"this SDK": _load_sdk("headway", here)}
    if a.baseline_sdk:
        sdks["baseline"] = _load_sdk("headway_baseline", a.baseline_sdk)
    import torch  # noqa: E402

    torch.manual_seed(0)
    torch.set_num_threads(1)
    width = a.width
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(64, width)
    y = torch.randn(64, 1)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    # Size the batch so that one step takes about --step-ms (twice: the cost is not
    # linear in the rows at small sizes).
    rows = 64
    for _ in range(2):
        for _ in range(30):
            step()
        t0 = time.perf_counter()
        for _ in range(100):
            step()
        per_step = (time.perf_counter() - t0) / 100
        rows = max(1, int(rows * a.step_ms / 1e3 / per_step))
        x = torch.randn(rows, width)
        y = torch.randn(rows, 1)

    # The capture server runs in a process of its own, as Headway's would: its threads
    # must not take this interpreter's lock from the loop being measured.
    server = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"],
                              stdout=subprocess.PIPE, text=True)
    url = "http://127.0.0.1:%d" % int(server.stdout.readline())
    reporters = {"empty call": _EmptyReporter()}
    reporters.update({name: sdk.Reporter(url=url, job="bench", token="t", env={})
                      for name, sdk in sdks.items()})
    # The same SDK with its Python intake: what it costs where the C part is not built.
    this = sdks["this SDK"].reporter
    built_intake = this.Intake
    if built_intake is not this.PyIntake:
        this.Intake = this.PyIntake
        reporters["py intake"] = sdks["this SDK"].Reporter(url=url, job="bench", token="t",
                                                          env={})
        this.Intake = built_intake
    # Outside Headway: the intake returns at once. With the C intake, the least any call
    # through it costs here, the floor under the figures above it.
    reporters["disabled"] = sdks["this SDK"].Reporter(env={})
    n = a.steps

    def plain():
        t = time.perf_counter()
        for _ in range(n):
            step()
        return n / (time.perf_counter() - t)

    def reporting(r, calls):
        clock = time.perf_counter_ns
        lr = opt.param_groups[0]["lr"]
        t = time.perf_counter()
        for i in range(n):
            loss = step().detach()
            s = clock()
            r.report(i, total_steps=n, epoch=i / n, loss=loss, learning_rate=lr)
            calls.append(clock() - s)
        rate = n / (time.perf_counter() - t)
        r.flush(30)
        return rate

    plain()  # warm-up
    rates = {"plain": []}
    calls = {name: [] for name in reporters}
    for name in reporters:
        rates[name] = []
    order = ["plain"] + list(reporters)
    shuffle = random.Random(1)
    for _ in range(a.rounds):  # interleaved, in a new order each round: drifts in the
        shuffle.shuffle(order)  # machine's speed then hit every variant alike
        for name in order:
            if name == "plain":
                rates["plain"].append(plain())
            else:
                rates[name].append(reporting(reporters[name], calls[name]))
    plain_rate = statistics.median(rates["plain"])
    print("step: %.2f ms (batch %d x %d, 1 thread); %d steps per loop, %d rounds, "
          "medians" % (1e3 / plain_rate, rows, width, n, a.rounds))
    print("%-10s %14s %14s %10s %8s" % ("", "report() p50", "report() p99", "steps/s",
                                         "lost"))
    print("%-10s %14s %14s %10.1f %8s" % ("no report", "", "", plain_rate, ""))
    for name, r in reporters.items():
        st = r.stats()
        r.close(5)
        c = sorted(calls[name])
        rate = statistics.median(rates[name])
        print("%-10s %11.2f us %11.2f us %10.1f %7.2f%%" % (
            name, c[len(c) // 2] / 1e3, c[int(len(c) * 0.99)] / 1e3, rate,
            100.0 * (plain_rate - rate) / plain_rate))
        if name not in ("empty call", "disabled") and st["sent"] < len(c):
            print("           %d of %d points delivered" % (st["sent"], len(c)))
    server.kill()
    server.wait()


def serve():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
        sys.exit(0)
    main()
