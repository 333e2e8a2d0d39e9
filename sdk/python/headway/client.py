"""A small REST client for Headway's read/submit API, for automation (early-stop
scripts, sweeps, dashboards in notebooks).

    c = Client()                                  # HEADWAY_SERVER / HEADWAY_URL, token
    for job in c.list_jobs(state="Running", label={"sweep": "lr"}):
        pts = c.get_metric(job["name"], "eval_loss", buckets=100)
        if pts and pts[-1]["value"] > 2.0:
            c.stop_job(job["name"])

Contract
--------
* Server URL: the `url` argument, else HEADWAY_SERVER, else HEADWAY_URL, else the
  `server:` of the CLI's config file, else http://127.0.0.1:8080. A path prefix in the
  URL (http://host/headway) is kept.
* Auth, found where the CLI finds it: the `token` argument, else HEADWAY_API_TOKEN, else
  HEADWAY_USER_TOKEN, else the `token:` of the CLI's config file (HEADWAY_CONFIG, else
  $XDG_CONFIG_HOME/headway/config, else ~/.config/headway/config), else the local
  server's admin token (DATA_DIR/admin-token, DATA_DIR being HEADWAY_DATA_DIR, else
  $XDG_DATA_HOME/headway, else ~/.local/share/headway) when this account may read it.
  Sent as `Authorization: Bearer`; without one no Authorization header is sent, and a
  401 says where a token may come from. `token_source` says which one was used.
* Results are the decoded JSON documents (dicts and lists), unwrapped where the server
  wraps a list: list_jobs() -> [job, ...], get_metric() -> [{"step", "value"}, ...],
  get_events() -> [event, ...]. When get_metric(buckets=N) is given more points than N
  the server downsamples: each bucket comes back as {"step": its last step, "value": its
  last value, "min", "max", "first_step", "count", "non_finite"}.
* Errors: every failure raises HeadwayError(status, code, message, field). `status` is
  the HTTP status, or None when no response came (connection refused, timeout); then code
  is "Unavailable". A non-2xx response's {"error": {"code", "message", "field"}} body
  fills them; without one, code follows the status (404 -> "NotFound", ...).
* Retries: GET requests are retried `retries` times (default 2) on connection errors,
  429 and 5xx, with a short exponential backoff. POSTs (submit, stop) are never retried.
* Thread safety: a Client may be shared between threads (one connection, serialised).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

from ._transport import Transport

DEFAULT_SERVER = "http://127.0.0.1:8080"


class HeadwayError(Exception):
    """A failed Headway API call: HTTP status (None if no response), code (the server's,
    e.g. "NotFound", "InvalidArgument"), message, and the offending field if the server
    named one."""

    def __init__(self, status: Optional[int], code: str, message: str,
                 field: Optional[str] = None) -> None:
        text = "%s %s: %s" % (status if status is not None else "-", code, message)
        if field:
            text += " (field %s)" % field
        super().__init__(text)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


LabelFilter = Union[None, str, Mapping[str, str], Sequence[str]]


class Client:
    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: float = 30.0, retries: int = 2, backoff: float = 0.2,
                 env: Optional[Mapping[str, str]] = None) -> None:
        env = os.environ if env is None else env
        config = _cli_config(env)
        self.url = (url or env.get("HEADWAY_SERVER") or env.get("HEADWAY_URL")
                    or config.get("server") or DEFAULT_SERVER).strip()
        self.token_source = "argument"
        self._config_path = _config_path(env)
        if token is None:
            token, self.token_source = _find_token(env, config)
        self._headers = {}
        if token:
            self._headers["Authorization"] = "Bearer " + token.strip()
        self._transport = Transport(self.url, timeout)  # ValueError on a bad URL
        self._retries = max(0, int(retries))
        self._backoff = backoff
        self._lock = threading.Lock()

    # -- API ---------------------------------------------------------------------

    def list_jobs(self, *, state: Optional[str] = None, team: Optional[str] = None,
                  label: LabelFilter = None, active: Optional[bool] = None
                  ) -> List[Dict[str, Any]]:
        """GET /api/v1/jobs, oldest first. label: "k=v[,k2=v2]", a list of "k=v", or a
        {k: v} dict (all must match); active=True: only jobs that have not ended."""
        query: List[Tuple[str, str]] = []
        if state:
            query.append(("state", state))
        if team:
            query.append(("team", team))
        if active is not None:
            query.append(("active", "true" if active else "false"))
        if label:
            if isinstance(label, str):
                selector = label
            elif isinstance(label, Mapping):
                selector = ",".join("%s=%s" % (k, v) for k, v in label.items())
            else:
                selector = ",".join(label)
            query.append(("label", selector))
        path = "/api/v1/jobs" + ("?" + urlencode(query) if query else "")
        return self._call("GET", path).get("jobs", [])

    def get_job(self, name: str) -> Dict[str, Any]:
        """GET /api/v1/jobs/{name}."""
        return self._call("GET", "/api/v1/jobs/" + _seg(name))

    def submit_job(self, spec: Union[Mapping[str, Any], str], *,
                   submit_dir: Optional[str] = None) -> Dict[str, Any]:
        """POST /api/v1/jobs; returns the created (queued) job. spec: a dict (sent as
        JSON) or the text of a YAML/JSON spec file (sent as application/yaml).
        submit_dir: absolute path sent as X-Headway-Submit-Dir (default working_dir)."""
        headers = {"X-Headway-Submit-Dir": submit_dir} if submit_dir else None
        if isinstance(spec, str):
            return self._call("POST", "/api/v1/jobs", raw=spec.encode("utf-8"),
                              content_type="application/yaml", headers=headers)
        return self._call("POST", "/api/v1/jobs", spec, headers=headers)

    def stop_job(self, name: str, *, reason: Optional[str] = None) -> Dict[str, Any]:
        """POST /api/v1/jobs/{name}/stop; returns the job."""
        body = {"reason": reason} if reason else None
        return self._call("POST", "/api/v1/jobs/%s/stop" % _seg(name), body)

    def get_metric(self, name: str, metric: str, *, buckets: Optional[int] = None
                   ) -> List[Dict[str, Any]]:
        """GET /api/v1/jobs/{name}/metrics/{metric}[?buckets=N] -> points."""
        path = "/api/v1/jobs/%s/metrics/%s" % (_seg(name), _seg(metric))
        if buckets is not None:
            path += "?" + urlencode({"buckets": int(buckets)})
        answer = self._call("GET", path)
        if "buckets" in answer:
            return [dict(b, step=b.get("last_step"), value=b.get("last"))
                    for b in answer["buckets"]]
        return answer.get("points", [])

    def get_events(self, name: str, *, after: Optional[int] = None) -> List[Dict[str, Any]]:
        """GET /api/v1/jobs/{name}/events -> events, oldest first (after: only ids > it)."""
        path = "/api/v1/jobs/%s/events" % _seg(name)
        if after is not None:
            path += "?" + urlencode({"after": int(after)})
        return self._call("GET", path).get("events", [])

    # Notebooks: a Jupyter server on the pool per notebook (`headway notebook ...`).

    def notebook_profiles(self) -> List[Dict[str, Any]]:
        """GET /api/v1/notebook-profiles -> the profiles the server offers."""
        return self._call("GET", "/api/v1/notebook-profiles").get("profiles", [])

    def list_notebooks(self) -> List[Dict[str, Any]]:
        """GET /api/v1/notebooks -> the caller's team's notebooks (every team's for admins)."""
        return self._call("GET", "/api/v1/notebooks").get("notebooks", [])

    def get_notebook(self, name: str) -> Dict[str, Any]:
        """GET /api/v1/notebooks/{name}."""
        return self._call("GET", "/api/v1/notebooks/" + _seg(name))

    def start_notebook(self, name: str, *, team: Optional[str] = None,
                       profile: Optional[str] = None, gpus: Optional[int] = None,
                       jupyterhub: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """POST /api/v1/notebooks: creates the notebook, or starts a stopped or culled one
        again with the same home. jupyterhub: {"user", "env"} (HeadwaySpawner's)."""
        body: Dict[str, Any] = {"name": name}
        if team:
            body["team"] = team
        if profile:
            body["profile"] = profile
        if gpus is not None:
            body["gpus"] = int(gpus)
        if jupyterhub is not None:
            body["jupyterhub"] = dict(jupyterhub)
        return self._call("POST", "/api/v1/notebooks", body)

    def stop_notebook(self, name: str) -> Dict[str, Any]:
        """POST /api/v1/notebooks/{name}/stop: its server stops, its home stays."""
        return self._call("POST", "/api/v1/notebooks/%s/stop" % _seg(name), {})

    def delete_notebook(self, name: str) -> Dict[str, Any]:
        """DELETE /api/v1/notebooks/{name}: stopped and forgotten; its home stays."""
        return self._call("DELETE", "/api/v1/notebooks/" + _seg(name))

    def close(self) -> None:
        with self._lock:
            self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, *, raw: Optional[bytes] = None,
              content_type: str = "application/json",
              headers: Optional[Mapping[str, str]] = None) -> Any:
        data = raw
        hdrs = dict(self._headers)
        if headers:
            hdrs.update(headers)
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode("utf-8")
        if data is not None:
            hdrs["Content-Type"] = content_type
        elif method == "POST":
            data = b""
        attempts = 1 + (self._retries if method == "GET" else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                with self._lock:
                    status, _, raw = self._transport.request(
                        method, path, data, hdrs, idempotent=(method == "GET"))
            except Exception as e:
                if last:
                    raise HeadwayError(None, "Unavailable", "%s %s: %s: %s" % (
                        method, path, type(e).__name__, e)) from e
                time.sleep(self._backoff * (2 ** attempt))
                continue
            if 200 <= status < 300:
                if not raw.strip():
                    return {}
                try:
                    return json.loads(raw.decode("utf-8"))
                except ValueError as e:
                    raise HeadwayError(status, "BadResponse",
                                       "response is not JSON: %s" % e) from e
            if (status == 429 or status >= 500) and not last:
                time.sleep(self._backoff * (2 ** attempt))
                continue
            error = _error_from(status, raw)
            if status == 401:
                error = HeadwayError(status, error.code, "%s (token from %s; pass token=, set "
                                     "HEADWAY_API_TOKEN, or write token: in %s)" % (
                                         error.message, self.token_source or "nowhere",
                                         self._config_path or "~/.config/headway/config"),
                                     error.field)
            raise error
        raise AssertionError("unreachable")


def _config_path(env: Mapping[str, str]) -> str:
    """The CLI's config file: HEADWAY_CONFIG, else $XDG_CONFIG_HOME/headway/config, else
    ~/.config/headway/config."""
    if env.get("HEADWAY_CONFIG"):
        return env["HEADWAY_CONFIG"]
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, "headway", "config")
    home = env.get("HOME")
    return os.path.join(home, ".config", "headway", "config") if home else ""


def _cli_config(env: Mapping[str, str]) -> Dict[str, str]:
    """The server and token of the CLI's config file ({} when there is none or it cannot
    be read). Its keys are flat strings (server, token, cacert), so the YAML library is
    used where it is installed and a line reader otherwise."""
    path = _config_path(env)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    try:
        import yaml  # type: ignore
        loaded = yaml.safe_load(text)
        if isinstance(loaded, dict):
            return {str(k): str(v) for k, v in loaded.items() if isinstance(v, (str, int))}
        return {}
    except ImportError:
        pass
    except Exception:
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "#")):
            out[key.strip()] = value.strip().strip("'\"")
    return out


def _data_dir(env: Mapping[str, str]) -> str:
    if env.get("HEADWAY_DATA_DIR"):
        return env["HEADWAY_DATA_DIR"]
    if env.get("XDG_DATA_HOME"):
        return os.path.join(env["XDG_DATA_HOME"], "headway")
    return os.path.join(env.get("HOME") or ".", ".local", "share", "headway")


def _find_token(env: Mapping[str, str], config: Mapping[str, str]) -> Tuple[str, str]:
    """(token, where it came from), in the CLI's order; ("", "") when none."""
    for name in ("HEADWAY_API_TOKEN", "HEADWAY_USER_TOKEN"):
        if env.get(name):
            return env[name], name
    if config.get("token"):
        return config["token"], _config_path(env)
    admin = os.path.join(_data_dir(env), "admin-token")
    try:
        with open(admin, encoding="utf-8") as f:
            line = f.readline().strip()
        if line:
            return line, admin
    except OSError:
        pass
    return "", ""


# Codes for error responses without a JSON error body (the server's codes, by status).
_STATUS_CODES = {400: "InvalidArgument", 401: "Unauthenticated", 403: "PermissionDenied",
                 404: "NotFound", 409: "Conflict", 413: "PayloadTooLarge",
                 429: "ResourceExhausted", 500: "Internal", 503: "Unavailable"}


def _seg(s: str) -> str:
    return quote(str(s), safe="")


def _error_from(status: int, raw: bytes) -> HeadwayError:
    code = _STATUS_CODES.get(status, "HTTP%d" % status)
    message = raw.decode("utf-8", "replace").strip()[:500]
    try:
        err = json.loads(raw.decode("utf-8")).get("error")
        if isinstance(err, dict):
            code = str(err.get("code") or code)
            message = str(err.get("message") or message)
            field = err.get("field")
            return HeadwayError(status, code, message, str(field) if field else None)
    except Exception:
        pass
    return HeadwayError(status, code, message)
