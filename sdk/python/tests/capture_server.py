"""Test double of the Headway server, NOT the real one (the C++ server is written
separately): an http.server on 127.0.0.1, port 0, that records every request and answers
from a script, so the SDK can be tested against real sockets without the control plane.

    srv = CaptureServer()             # started
    srv.script(500, times=2)          # the next two requests get 500
    srv.route("GET", "/api/v1/jobs/a", 200, {...})
    srv.delay = 0.5                   # answer slowly
    srv.wait_for(3, timeout=5)        # until 3 requests were recorded
    srv.close()
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import parse_qs, urlsplit


def _strict(raw: bytes) -> Any:
    def no_constants(name: str) -> Any:
        raise ValueError("non-strict JSON constant %s" % name)
    return json.loads(raw.decode("utf-8"), parse_constant=no_constants)


class Recorded:
    def __init__(self, method: str, target: str, headers: Dict[str, str], body: bytes):
        self.method = method
        self.target = target
        parts = urlsplit(target)
        self.path = parts.path
        self.query = parse_qs(parts.query)
        self.headers = headers
        self.body = body
        is_json = headers.get("content-type", "").startswith("application/json")
        self.json = _strict(body) if body and is_json else None
        self.status = 0      # what the double answered
        self.client = None   # (host, port) of the client connection

    def reports(self) -> List[Dict[str, Any]]:
        """The progress points in this request, single or batch form."""
        if isinstance(self.json, dict) and "reports" in self.json:
            return self.json["reports"]
        return [self.json]


class CaptureServer:
    def __init__(self) -> None:
        self.requests: List[Recorded] = []
        self.delay = 0.0
        self.default: Tuple[int, Any, Dict[str, str]] = (200, {"accepted": True}, {})
        self._script: List[Tuple[int, Any, Dict[str, str]]] = []
        self._routes: Dict[Tuple[str, str], Tuple[int, Any, Dict[str, str]]] = {}
        self._cond = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, like a real server

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                rec = Recorded(self.command, self.path,
                               {k.lower(): v for k, v in self.headers.items()}, body)
                status, doc, extra = owner._answer(rec)
                rec.status, rec.client = status, self.client_address
                with owner._cond:  # recorded before answering: flush() may return next
                    owner.requests.append(rec)
                    owner._cond.notify_all()
                if owner.delay:
                    time.sleep(owner.delay)
                data = json.dumps(doc).encode() if doc is not None else b""
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def _answer(self, rec: Recorded) -> Tuple[int, Any, Dict[str, str]]:
        with self._cond:
            if self._script:
                return self._script.pop(0)
            return self._routes.get((rec.method, rec.path), self.default)

    def script(self, status: int, doc: Any = None, times: int = 1,
               headers: Optional[Dict[str, str]] = None) -> None:
        if doc is None and status >= 400:
            doc = {"error": {"code": "scripted", "message": "scripted %d" % status}}
        with self._cond:
            self._script.extend([(status, doc, headers or {})] * times)

    def route(self, method: str, path: str, status: int, doc: Any) -> None:
        with self._cond:
            self._routes[(method, path)] = (status, doc, {})

    def wait_for(self, n: int, timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def points(self) -> List[Dict[str, Any]]:
        with self._cond:
            return [p for r in self.requests for p in r.reports()]

    def acked_points(self) -> List[Dict[str, Any]]:
        """Points of requests that were answered 2xx."""
        with self._cond:
            return [p for r in self.requests if 200 <= r.status < 300 for p in r.reports()]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class SilentServer:
    """A socket that listens but never accepts or reads: connects succeed (the kernel
    completes the handshake into the backlog), requests are never answered."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def closed_port_url() -> str:
    """A URL whose port had a listener a moment ago and has none now: connection refused."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "http://127.0.0.1:%d" % port
