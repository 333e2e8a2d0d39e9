"""Artifacts from inside a job: save a checkpoint or model, load one back.

    import headway
    headway.save_artifact("ckpt.pt", name="mnist-ckpt", kind="checkpoint",
                          step=step, metrics={"eval_loss": 0.41})
    headway.load_artifact("mnist-data:3", "data.tar")      # records that this job used it

Both authenticate as the job (HEADWAY_URL, HEADWAY_JOB, HEADWAY_TOKEN), so the artifact
belongs to the job's team, names the job (and its attempt) as its producer, and a load is
recorded as a use: `headway artifacts lineage NAME` shows both. Bytes are streamed from
and to disk, never held in memory; a download is checked against the artifact's SHA-256
before it is moved into place. With an S3 store, large files go up in parts, four at a
time, each bound to its MD5; a save cut off and tried again sends only the missing parts. Unlike report(), these raise HeadwayError on failure:
a checkpoint that was not saved must not pass silently. Standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import ssl
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit

from .client import HeadwayError

_CHUNK = 1 << 20


def _job_env() -> Tuple[str, str, str]:
    url = os.environ.get("HEADWAY_URL", "")
    job = os.environ.get("HEADWAY_JOB", "")
    token = os.environ.get("HEADWAY_TOKEN", "")
    if not (url and job and token):
        raise HeadwayError(None, "FailedPrecondition",
                           "not running as a Headway job (HEADWAY_URL, HEADWAY_JOB and "
                           "HEADWAY_TOKEN are needed)")
    return url.rstrip("/"), job, token


def _connection(url: str, timeout: float) -> Tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(url)
    if parts.scheme == "https":
        # The control plane's CA (HEADWAY_CA_FILE, set by the platform); an object store
        # reached with a presigned URL may have its own (AWS_CA_BUNDLE, as botocore reads it).
        cafile = os.environ.get("HEADWAY_CA_FILE") or None
        if not url.startswith(os.environ.get("HEADWAY_URL", "") or "\0"):
            cafile = os.environ.get("AWS_CA_BUNDLE") or cafile
        context = ssl.create_default_context(cafile=cafile)
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout, context=context)
    elif parts.scheme == "http":
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    else:
        raise HeadwayError(None, "InvalidArgument", "not an http(s) URL: %r" % (url,))
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return conn, target


def _send(url: str, method: str, headers: Mapping[str, str], body: Any = None,
          timeout: float = 600.0) -> Tuple[int, Dict[str, str], bytes]:
    conn, target = _connection(url, timeout)
    try:
        conn.request(method, target, body=body, headers=dict(headers))
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _check(status: int, raw: bytes) -> Dict[str, Any]:
    try:
        parsed = json.loads(raw.decode("utf-8")) if raw else {}
    except ValueError:
        parsed = {}
    if status >= 400:
        error = parsed.get("error", {}) if isinstance(parsed, dict) else {}
        message = error.get("message") or raw.decode("utf-8", "replace")[:200]
        if error.get("field"):
            message = "%s: %s" % (error["field"], message)
        raise HeadwayError(status, error.get("code", "Unknown"), message)
    return parsed


def _digest(path: str) -> Tuple[str, str, int]:
    """SHA-256 (the artifact's address), base64 MD5 (binds a presigned upload), size."""
    sha, md5, size = hashlib.sha256(), hashlib.md5(usedforsecurity=False), 0
    with open(path, "rb") as f:
        while True:
            block = f.read(_CHUNK)
            if not block:
                break
            sha.update(block)
            md5.update(block)
            size += len(block)
    return "sha256:" + sha.hexdigest(), base64.b64encode(md5.digest()).decode("ascii"), size


class _FileRange:
    """`length` bytes of an open file from its current position, as a request body."""

    def __init__(self, f: Any, length: int) -> None:
        self._f, self._left = f, length

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        block = self._f.read(self._left if n is None or n < 0 else min(n, self._left))
        self._left -= len(block)
        return block


def _part_md5(path: str, offset: int, length: int) -> "hashlib._Hash":
    md5 = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        f.seek(offset)
        left = length
        while left > 0:
            block = f.read(min(_CHUNK, left))
            if not block:
                raise HeadwayError(None, "DataLoss", "%s shrank while being uploaded" % path)
            md5.update(block)
            left -= len(block)
    return md5


def _upload_parts(version_url: str, auth: Mapping[str, str], path: str, size: int,
                  plan: Mapping[str, Any], concurrency: int = 4) -> None:
    """Sends the parts of a multipart upload the store does not hold yet, each with a
    presigned request the server binds to its MD5."""
    upload_id, part_size, count = plan["upload_id"], int(plan["part_size"]), int(plan["part_count"])
    status, _, raw = _send(version_url + "/parts?upload_id=" + quote(upload_id, safe=""), "GET", auth)
    stored = {p.get("number"): p for p in _check(status, raw).get("parts", [])}

    def send(number: int) -> None:
        offset = (number - 1) * part_size
        length = part_size if number < count else size - offset
        md5 = _part_md5(path, offset, length)
        have = stored.get(number)
        if have and have.get("size") == length and have.get("etag") == md5.hexdigest():
            return
        ask = {"upload_id": upload_id, "parts": [
            {"number": number, "content_md5": base64.b64encode(md5.digest()).decode("ascii")}]}
        status, _, raw = _send(version_url + "/parts", "POST",
                               dict(auth, **{"Content-Type": "application/json"}),
                               json.dumps(ask).encode("utf-8"))
        request = _check(status, raw)["parts"][0]
        headers = {"Content-Type": "application/octet-stream"}
        headers.update(request.get("headers") or {})
        headers["Content-Length"] = str(length)
        for attempt in range(3):
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    status, _, raw = _send(request["url"], request.get("method", "PUT"), headers,
                                           _FileRange(f, length))
            except OSError as e:
                status, raw = 0, str(e).encode("utf-8")
            if status < 300 or 400 <= status < 500:
                break
            time.sleep(0.25 * (attempt + 1))
        if status >= 300 or status == 0:
            raise HeadwayError(status or None, "UploadFailed", "part %d of %d: %s" % (
                number, count, raw.decode("utf-8", "replace")[:300]))

    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, count))) as pool:
        for _ in pool.map(send, range(1, count + 1)):
            pass


def save_artifact(path: str, name: str, *, kind: str = "checkpoint",
                  step: Optional[int] = None, metrics: Optional[Mapping[str, float]] = None,
                  labels: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Stores the file at `path` as a new version of artifact `name`; returns its record
    (with "ref", e.g. "mnist-ckpt:4"). A file whose bytes are stored already is not sent
    again."""
    url, job, token = _job_env()
    auth = {"Authorization": "Bearer " + token, "X-Headway-Job": job}
    digest, content_md5, size = _digest(path)
    record: Dict[str, Any] = {"name": name, "kind": kind, "size": size, "digest": digest,
                              "content_md5": content_md5, "multipart": True}
    if step is not None:
        record["producer"] = {"step": int(step)}
    if metrics:
        record["metrics"] = {k: (v if v == v and abs(v) != float("inf") else
                                 ("NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")))
                             for k, v in ((k, float(v)) for k, v in metrics.items())}
    if labels:
        record["labels"] = dict(labels)
    status, _, raw = _send(url + "/api/v1/artifacts", "POST",
                           dict(auth, **{"Content-Type": "application/json"}),
                           json.dumps(record).encode("utf-8"))
    created = _check(status, raw)
    upload = created.get("upload")
    if not upload:
        return created["artifact"]
    a = created["artifact"]
    version_url = "%s/api/v1/artifacts/%s/versions/%d" % (url, quote(a["name"], safe=""), a["version"])
    if upload.get("multipart"):
        _upload_parts(version_url, auth, path, size, upload["multipart"])
        status, _, raw = _send(version_url + "/commit", "POST",
                               dict(auth, **{"Content-Type": "application/json"}),
                               json.dumps({"upload_id": upload["multipart"]["upload_id"]}).encode("utf-8"))
        return _check(status, raw)
    headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
    headers.update(upload.get("headers") or {})
    target = upload["url"]
    through_server = target.startswith("/")
    if through_server:
        headers.update(auth)
        target = url + target
    with open(path, "rb") as body:
        status, _, raw = _send(target, upload.get("method", "PUT"), headers, body)
    if through_server:
        return _check(status, raw)
    if status >= 300:
        raise HeadwayError(status, "UploadFailed", raw.decode("utf-8", "replace")[:300])
    status, _, raw = _send(version_url + "/commit", "POST", auth)
    return _check(status, raw)


def load_artifact(ref: str, destination: str) -> Dict[str, Any]:
    """Downloads artifact `ref` ("NAME" for its newest ready version, or "NAME:VERSION")
    to `destination` (a file path, or a directory to put it in under its name), checks its
    SHA-256, and returns its record. The server records that this job used it."""
    url, job, token = _job_env()
    auth = {"Authorization": "Bearer " + token, "X-Headway-Job": job}
    name, _, version = ref.partition(":")
    base = "%s/api/v1/artifacts/%s/versions/%s" % (url, quote(name, safe=""), version or "latest")
    status, _, raw = _send(base, "GET", auth)
    record = _check(status, raw)
    if os.path.isdir(destination):
        destination = os.path.join(destination, record["name"])
    content = "%s/api/v1/artifacts/%s/versions/%d/content" % (url, quote(record["name"], safe=""),
                                                                record["version"])
    partial = destination + ".partial"
    target, headers = content, auth
    for _ in range(2):  # the server may redirect to the object store
        conn, path = _connection(target, 600.0)
        try:
            conn.request("GET", path, headers=headers)
            resp = conn.getresponse()
            if resp.status in (301, 302, 303, 307, 308) and resp.getheader("Location"):
                resp.read()
                target, headers = resp.getheader("Location"), {}
                continue
            if resp.status >= 300:
                _check(resp.status, resp.read())
                raise HeadwayError(resp.status, "Unknown", "download failed")
            sha = hashlib.sha256()
            with open(partial, "wb") as out:
                while True:
                    block = resp.read(_CHUNK)
                    if not block:
                        break
                    sha.update(block)
                    out.write(block)
            break
        finally:
            conn.close()
    if "sha256:" + sha.hexdigest() != record["digest"]:
        os.unlink(partial)
        raise HeadwayError(None, "DataLoss", "the bytes received for %s do not match its digest"
                           % record["ref"])
    os.replace(partial, destination)
    return record


def _checkpoint_name(job: str) -> str:
    return job + ".checkpoint"


def save_checkpoint(path: Optional[str] = None, *, step: int,
                    metrics: Optional[Mapping[str, float]] = None,
                    keep_latest: Optional[int] = None, keep_best: Optional[int] = None,
                    best_metric: Optional[str] = None, best_mode: str = "min") -> Dict[str, Any]:
    """Stores a checkpoint of this job in the artifact store, so that a later attempt
    (after a preemption, a restart, or on another node) gets it back with
    restore_checkpoint(). `path` is a file or a directory (default: HEADWAY_CHECKPOINT_DIR),
    kept as artifact "<job>.checkpoint", kind checkpoint, with the step and metrics.

    Retention: keep_latest=N keeps the N newest checkpoints, keep_best=N the N best by
    `best_metric` (`best_mode` "min" or "max"); the store lets go of the others (never one
    a running job is reading)."""
    _, job, _ = _job_env()
    path = path or os.environ.get("HEADWAY_CHECKPOINT_DIR", "")
    if not path or not os.path.exists(path):
        raise HeadwayError(None, "InvalidArgument", "no checkpoint at %r" % (path,))
    with tempfile.TemporaryDirectory() as tmp:
        packed = os.path.join(tmp, "checkpoint.tar")
        with tarfile.open(packed, "w") as tar:
            # A fixed order and no owner or time: the same files give the same bytes,
            # which the store keeps once.
            def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                return info
            if os.path.isdir(path):
                for root, dirs, files in os.walk(path):
                    dirs.sort()
                    for name in sorted(files):
                        full = os.path.join(root, name)
                        tar.add(full, arcname=os.path.relpath(full, path), filter=clean)
            else:
                tar.add(path, arcname=os.path.basename(path), filter=clean)
        labels = {"headway.dev/checkpoint-of": job}
        if keep_latest is not None:
            labels["headway.dev/keep-latest"] = str(int(keep_latest))
        if keep_best is not None:
            labels["headway.dev/keep-best"] = str(int(keep_best))
            labels["headway.dev/best-metric"] = best_metric or ""
            labels["headway.dev/best-mode"] = best_mode
        return save_artifact(packed, _checkpoint_name(job), kind="checkpoint", step=step,
                             metrics=metrics, labels=labels)


def restore_checkpoint(destination: Optional[str] = None) -> Optional[int]:
    """Unpacks this job's newest checkpoint (saved by save_checkpoint, by any attempt)
    into `destination` (default: HEADWAY_CHECKPOINT_DIR) and returns its step; None when
    the job has none yet."""
    _, job, _ = _job_env()
    destination = destination or os.environ.get("HEADWAY_CHECKPOINT_DIR", "")
    if not destination:
        raise HeadwayError(None, "InvalidArgument", "no destination (HEADWAY_CHECKPOINT_DIR is unset)")
    os.makedirs(destination, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        packed = os.path.join(tmp, "checkpoint.tar")
        try:
            record = load_artifact(_checkpoint_name(job), packed)
        except HeadwayError as e:
            if e.status == 404:
                return None
            raise
        with tarfile.open(packed, "r") as tar:
            root = os.path.realpath(destination)
            for member in tar.getmembers():
                target = os.path.realpath(os.path.join(destination, member.name))
                if not (member.isfile() or member.isdir()) or \
                        os.path.commonpath([root, target]) != root:
                    raise HeadwayError(None, "DataLoss", "unsafe entry in checkpoint: %r" % member.name)
            tar.extractall(destination)
    return record.get("producer", {}).get("step")
