#!/usr/bin/python3
"""Start-up cost of a job in an OCI image against the same job on the host.

Starts a real registry on loopback (Debian's docker-registry), builds a
busybox image with a filler layer (buildah), starts a real Headway server
and runs one-rank `/bin/true` jobs, one after another:

  host         no image
  image warm   the image already pulled and unpacked (IfNotPresent)
  image cold   the image cache emptied before each job: pull, unpack, run

and prints, from the server's own timestamps, submit -> running and
submit -> succeeded (p50, p95), side by side with the host's. Run as root
from the repository root after a build:

  /usr/bin/python3 bench/image_bench.py [--runs 20] [--filler-mib 20]
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADWAY = os.environ.get("HEADWAY_BIN", os.path.join(ROOT, "build", "headway"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def reachable(url):
    try:
        urllib.request.urlopen(url, timeout=2)
        return True
    except Exception as e:  # 401 from /v2/ still means it is up
        return hasattr(e, "code")


def build_image(reference, filler_mib):
    script = f"""set -e
c=$(buildah from scratch)
trap 'buildah rm $c >/dev/null' EXIT
m=$(buildah mount $c)
mkdir -p $m/bin $m/tmp $m/mnt
cp /bin/busybox $m/bin/busybox
for a in sh true ls; do ln -s busybox $m/bin/$a; done
head -c {filler_mib}M /dev/urandom > $m/filler
buildah config --env PATH=/bin $c
buildah commit -q $c image-bench-build >/dev/null
buildah push -q --tls-verify=false image-bench-build docker://{reference}
buildah rmi image-bench-build >/dev/null
"""
    subprocess.run(["/bin/sh", "-c", script], check=True)


def stamp(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Server:
    def __init__(self, base, registry):
        self.data = os.path.join(base, "data")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(base, "server.log"), "w")
        self.proc = subprocess.Popen(
            [HEADWAY, "server", "--data-dir", self.data, "--listen", f"127.0.0.1:{self.port}",
             "--gpus", "0", "--insecure-registry", registry],
            stdout=self.log, stderr=subprocess.STDOUT)
        token = os.path.join(self.data, "admin-token")
        if not wait_for(lambda: os.path.exists(token) and reachable(self.url + "/healthz")):
            sys.exit("the server did not start; see " + self.log.name)
        self.token = open(token).read().strip()

    def call(self, method, path, body=None):
        request = urllib.request.Request(
            self.url + path, method=method, data=body.encode() if body else None,
            headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/yaml"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def run(self, name, spec):
        self.call("POST", "/api/v1/jobs", f"name: {name}\n{spec}")
        job = {}

        def ended():
            nonlocal job
            job = self.call("GET", f"/api/v1/jobs/{name}")
            return job.get("state") in ("Succeeded", "Failed", "Stopped")
        if not wait_for(ended, 120) or job.get("state") != "Succeeded":
            sys.exit(f"job {name} ended {job.get('state')}: {job.get('message')}")
        created = stamp(job["created_at"])
        return (stamp(job["started_at"]) - created) * 1e3, (stamp(job["finished_at"]) - created) * 1e3

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--filler-mib", type=int, default=20)
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: jobs in images need a root server")
    base = tempfile.mkdtemp(prefix="headway-image-bench-", dir="/var/tmp")
    registry_port = free_port()
    registry_host = f"127.0.0.1:{registry_port}"
    with open(os.path.join(base, "registry.yml"), "w") as f:
        f.write(f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
                f"    rootdirectory: {base}/registry\nhttp:\n  addr: {registry_host}\n")
    registry = subprocess.Popen(["/usr/bin/docker-registry", "serve", f"{base}/registry.yml"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = None
    try:
        if not wait_for(lambda: reachable(f"http://{registry_host}/v2/")):
            sys.exit("the registry did not start")
        image = f"{registry_host}/bench/busybox:1"
        build_image(image, args.filler_mib)
        server = Server(base, registry_host)
        rows = {"host": [], "image warm": [], "image cold": []}
        server.run("warm-up", f"image: {image}\ncommand: [/bin/true]\n")
        for i in range(args.runs):
            # Interleaved, so drift on the machine touches each kind alike.
            rows["host"].append(server.run(f"host-{i}", "command: [/bin/true]\n"))
            rows["image warm"].append(
                server.run(f"warm-{i}", f"image: {image}\ncommand: [/bin/true]\n"))
            shutil.rmtree(os.path.join(server.data, "images"), ignore_errors=True)
            rows["image cold"].append(
                server.run(f"cold-{i}", f"image: {image}\ncommand: [/bin/true]\n"))
        print(f"{args.runs} runs each; image: busybox + {args.filler_mib} MiB layer "
              f"from a registry on loopback")
        print(f"{'job':<12} {'to running p50':>15} {'p95':>8} {'to done p50':>12} {'p95':>8}"
              f" {'x host (done p50)':>18}")
        host_done = statistics.median(d for _, d in rows["host"])
        for kind, samples in rows.items():
            started = sorted(s for s, _ in samples)
            done = sorted(d for _, d in samples)
            p95 = lambda v: v[min(len(v) - 1, int(0.95 * (len(v) - 1) + 0.5))]
            print(f"{kind:<12} {statistics.median(started):>12.0f} ms {p95(started):>5.0f} ms"
                  f" {statistics.median(done):>9.0f} ms {p95(done):>5.0f} ms"
                  f" {statistics.median(done) / host_done:>17.2f}x")
    finally:
        if server:
            server.stop()
        registry.kill()
        registry.wait()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
