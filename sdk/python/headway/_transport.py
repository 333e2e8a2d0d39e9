"""Internal: one persistent HTTP/1.1 connection to a Headway server.

Standard library only (http.client). Proxies from the environment (HTTP_PROXY, ...)
are deliberately not used: the control plane is normally on the cluster network, and a
proxy meant for package downloads would break reporting rather than help it.

Thread safety: a Transport is NOT thread-safe; the owner serialises calls (the Reporter
has a single sender thread, the Client holds a lock). abort() is the exception: it may be
called from any thread to unblock a request stuck waiting for a response.

Errors: request() raises OSError (connection refused, timeouts: TimeoutError) or
http.client.HTTPException on transport failures; any HTTP status is returned, not raised.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
from typing import Mapping, Optional, Tuple
from urllib.parse import urlsplit

USER_AGENT = "headway-python/0.1"

# Errors that, on a connection that already served a request, usually mean the server
# closed the idle keep-alive connection: the request is retried once on a fresh one.
_STALE_ERRORS = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)


class Transport:
    def __init__(self, base_url: str, timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http(s) URL: %r" % (base_url,))
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port  # may raise ValueError for a bad port: caller's problem
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout
        self._conn: Optional[http.client.HTTPConnection] = None
        self._used = False

    def _connect(self) -> http.client.HTTPConnection:
        if self._https:
            # HEADWAY_CA_FILE: the server's own certificate chain, which a
            # server with --tls-cert hands to its jobs (it may be self-signed).
            return http.client.HTTPSConnection(
                self._host, self._port, timeout=self._timeout,
                context=ssl.create_default_context(cafile=os.environ.get("HEADWAY_CA_FILE") or None))
        return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout)

    def request(self, method: str, path: str, body: Optional[bytes] = None,
                headers: Optional[Mapping[str, str]] = None,
                idempotent: bool = True) -> Tuple[int, http.client.HTTPMessage, bytes]:
        """Sends one request; returns (status, response headers, body bytes)."""
        hdrs = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if headers:
            hdrs.update(headers)
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = self._connect()
                self._used = False
            conn, reused = self._conn, self._used
            try:
                conn.request(method, self._prefix + path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
            except _STALE_ERRORS:
                self.close()
                if reused and idempotent and attempt == 0:
                    continue
                raise
            except BaseException:
                self.close()
                raise
            self._used = True
            if resp.will_close:
                self.close()
            return resp.status, resp.headers, data
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass

    def abort(self) -> None:
        """Unblocks a request in progress in another thread (shuts the socket down)."""
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
