#!/usr/bin/python3
"""Notebook spawn-to-ready and idle-reclaim timing, side by side in one run:

  * a Headway notebook (`POST /api/v1/notebooks` until its server answers through the proxy);
  * Debian's JupyterHub spawning onto Headway with HeadwaySpawner (hub API spawn request until
    the server answers through the hub's proxy);
  * the same JupyterHub with its own LocalProcessSpawner (a plain local spawn, for context);
  * idle reclaim: how long after its idle_timeout a notebook is culled and its job has ended.

    /usr/bin/python3 bench/notebook_bench.py [--runs 5] [--bin build/headway]

Prints medians and each run; asserts nothing. Needs root (jobs run as `nobody`), Debian's
python3-notebook, jupyterhub and node-configurable-http-proxy (scripts/setup --test).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "sdk", "python", "tests"))
sys.path.insert(0, os.path.join(REPO, "sdk", "python"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bin", default=os.path.join(REPO, "build", "headway"))
    args = parser.parse_args()
    os.environ["HEADWAY_BIN"] = os.path.abspath(args.bin)
    import test_real_server
    test_real_server.BIN = os.environ["HEADWAY_BIN"]
    from test_real_server import RealServer, wait_for
    from test_jupyterhub import Hub, call

    results = {"headway": [], "hub+headway": [], "hub local": [], "cull lag": []}
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        profiles = os.path.join(tmp, "profiles.yaml")
        with open(profiles, "w") as f:
            f.write("profiles:\n  - name: bench\n    idle_timeout: 5s\n    cull_warning: 2s\n")
        headway = RealServer(tmp, "--notebook-profiles", profiles,
                             "--notebook-check-interval", "1s").start()
        try:
            client = headway.client()
            auth = {"Authorization": "Bearer " + headway.token}

            def proxied_ok(name):
                request = urllib.request.Request(
                    "%s/notebooks/%s/api/status" % (headway.url, name), headers=auth)
                try:
                    with urllib.request.urlopen(request, timeout=5) as answer:
                        return answer.status == 200
                except OSError:
                    return False

            for i in range(args.runs):
                name = "bench-%d" % i
                began = time.monotonic()
                client.start_notebook(name)
                assert wait_for(lambda: proxied_ok(name), timeout=120)
                results["headway"].append(time.monotonic() - began)
                # Idle reclaim: untouched, it is culled 5 s after it came up.
                ready_at = time.time()
                assert wait_for(lambda: client.get_notebook(name)["state"] == "Culled", timeout=60)
                job = client.get_notebook(name)["job"]
                assert wait_for(lambda: client.get_job(job)["state"] == "Stopped", timeout=60)
                results["cull lag"].append(time.time() - ready_at - 5.0)

            status, created = call(headway.url + "/api/v1/tokens", "POST", headway.token,
                                   {"name": "spawner", "team": "bench", "role": "member"},
                                   auth="Bearer")
            assert status == 201, created
            for kind in ("hub+headway", "hub local"):
                hub_dir = os.path.join(tmp, kind.replace(" ", "-").replace("+", "-"))
                os.makedirs(hub_dir)
                hub = Hub(hub_dir, headway.url, created["token"])
                if kind == "hub local":
                    with open(os.path.join(hub_dir, "jupyterhub_config.py"), "a") as f:
                        f.write('c.JupyterHub.spawner_class = "simple"\n'
                                'c.Spawner.args = ["--allow-root"]\n'
                                'c.Spawner.notebook_dir = "%s"\n' % hub_dir)
                hub.start()
                try:
                    for i in range(args.runs):
                        user = "user%d" % i
                        hub.api("/users/" + user, "POST")
                        began = time.monotonic()
                        hub.api("/users/%s/server" % user, "POST")
                        assert wait_for(
                            lambda: call("%s/user/%s/api/status" % (hub.url, user))[0] == 200,
                            timeout=120), hub.log()
                        results[kind].append(time.monotonic() - began)
                        hub.api("/users/%s/server" % user, "DELETE")
                finally:
                    hub.stop()
                    hub.stop_proxy()
        finally:
            headway.stop()
            headway.end_jobs()

    print("notebook spawn to ready (seconds; %d runs each, median first)" % args.runs)
    for kind in ("headway", "hub+headway", "hub local"):
        runs = results[kind]
        print("  %-28s %6.2f   runs: %s" % (
            {"headway": "Headway notebook (proxied)", "hub+headway": "JupyterHub + HeadwaySpawner",
             "hub local": "JupyterHub, local spawner"}[kind],
            statistics.median(runs), " ".join("%.2f" % r for r in runs)))
    lag = results["cull lag"]
    print("idle reclaim: culled and its job ended %.2f s (median) after its 5 s idle_timeout"
          " (check interval 1 s; runs: %s)" % (statistics.median(lag),
                                                 " ".join("%.2f" % r for r in lag)))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
