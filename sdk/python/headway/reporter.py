"""Non-blocking progress reporting from a training loop to Headway.

    reporter = Reporter()                 # configured from the environment
    reporter.report(step, total_steps=N, epoch=e, loss=0.41, learning_rate=3e-4)
    reporter.flush(timeout=5.0)           # optional; also done at interpreter exit

Contract
--------
* report() never blocks on the network, never waits for a lock and never raises into the
  caller. It stamps the call with the wall-clock time and keeps its arguments, as they
  are, in a bounded intake buffer (PyIntake, or headway._intake.Intake in C where it is
  built: well under a microsecond either way). One daemon thread, started
  on the first report(), validates and converts what the intake holds and sends it in
  batches. Values are read there, not in report(): a tensor changed in place after
  report() is sent with its new value, so report `loss.item()` or a fresh tensor, as
  training loops do.
* Invalid input is logged once per kind (logger "headway", WARNING) and dropped: a bad
  `step` (not an integer >= 0) drops the point; a bad metric (value not a number, name
  not 1-128 characters of [A-Za-z0-9_./-], beyond 256 metrics) or a bad total_steps (not
  an integer >= 1), epoch or total_epochs (not finite >= 0) drops only that field. These
  are the server's limits; checking them per point keeps one bad value from getting a
  whole batch refused. Metric values that are numbers but not finite (NaN, +-inf) are
  valid and sent as "NaN", "Infinity", "-Infinity".
  Numeric scalars with .item() (numpy, 0-d torch tensors) are converted on the sender
  thread; for a CUDA tensor that synchronises the device there, not in the training loop.
* Coalescing policy: the intake and the queue of validated points each hold at most
  `max_queue` points (default 10000). When one is full, the OLDEST points are dropped
  first; the point just reported is always kept, so after any outage the server receives
  the most recent state. If a dropped point carried total_steps / total_epochs and the
  next kept point does not, the totals are carried over to it, so they are not lost.
  Points already inside a request that then fails are put back at the head of the queue
  and compete under the same policy.
* Delivery: batches of up to `batch_size` points, at most one request per `interval`
  seconds (the first immediately) unless a full batch is waiting or flush() is waiting,
  which send at once. A single point is sent as a report object, several as
  {"reports": [...]}. 2xx acknowledges the batch. 429, 5xx, connection errors and timeouts
  are retried with capped exponential backoff (min_backoff doubling up to max_backoff,
  with jitter; a numeric Retry-After is honoured up to max_backoff) while new points keep
  being accepted and coalesced. Any other status (4xx: bad request, unauthenticated, ...)
  is not retried: the batch is dropped and logged; for 400 and 413 a batch of several
  points is first bisected, so only the point(s) the server refuses are lost. Batches are
  also split before sending when the body would exceed 768 KiB (the server takes 1 MiB).
* Rank: unless all_ranks=True, a process whose RANK (or, when RANK is unset, LOCAL_RANK)
  is set and not 0 does not report. Without a URL and a job (HEADWAY_URL / HEADWAY_JOB)
  the reporter is disabled; a disabled reporter's report() only checks one attribute.
* Exit: once something has been reported, an atexit hook flushes for at most
  `exit_timeout` seconds (default 5), so a dead server never makes exit hang.
* Thread safety: every public method may be called from any thread. After os.fork() the
  child gets an empty queue and starts its own sender thread on its first report().
* Options are fixed at construction.

Environment: HEADWAY_URL, HEADWAY_JOB, HEADWAY_TOKEN, RANK, LOCAL_RANK. Explicit
constructor arguments win over the environment.
"""

from __future__ import annotations

import atexit
import collections
import itertools
import json
import logging
import math
import operator
import os
import random
import re
import sys
import threading
import time
import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote

from ._transport import Transport

_log = logging.getLogger("headway")

# Field names of a report; they cannot be used as metric names.
RESERVED = frozenset(("step", "total_steps", "epoch", "total_epochs"))

_OK, _RETRY, _REJECT, _SPLIT = 0, 1, 2, 3
_NEVER = sys.maxsize  # an intake length report() never reaches
_IDLE_RECHECK = 1.0  # seconds an idle sender sleeps before it looks at the intake anyway
_now = time.time

# What the server accepts (src/core/progress_report.h); a request breaking any of these is
# rejected whole, so the reporter enforces them per point instead.
_METRIC_NAME = re.compile(r"[A-Za-z0-9_./-]{1,128}")
MAX_METRICS_PER_REPORT = 256
MAX_BODY_BYTES = 768 * 1024  # the server takes 1 MiB; larger batches are split first
_INT64_MAX = 2 ** 63 - 1

# Every live Reporter, so that a forked child can reset their threading state.
_live: "weakref.WeakSet[Reporter]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for r in list(_live):
        r._reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def rank_from_env(env: Mapping[str, str]) -> int:
    """RANK, else LOCAL_RANK, else 0. An unparsable value counts as 0."""
    for name in ("RANK", "LOCAL_RANK"):
        value = env.get(name)
        if value is not None and value.strip():
            try:
                return int(value)
            except ValueError:
                _log.warning("headway: ignoring non-integer %s=%r", name, value)
                return 0
    return 0


def as_number(value: Any) -> Any:
    """int/float for numeric scalars (bool -> int, .item() for numpy/torch); else raises."""
    t = type(value)
    if t is float or t is int:
        return value
    if t is bool:
        return int(value)
    if value is None or isinstance(value, (str, bytes, bytearray)):
        raise TypeError("not a number: %r" % (value,))
    item = getattr(value, "item", None)
    if callable(item):
        value = item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value
    return float(value)


def _as_step(value: Any) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("not an integer: %r" % (value,))
        value = int(value)
    elif isinstance(value, bool):
        raise TypeError("not an integer: %r" % (value,))
    else:
        if not isinstance(value, int):
            item = getattr(value, "item", None)
            if callable(item):
                value = item()
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
        value = operator.index(value)
    if value < 0 or value > _INT64_MAX:
        raise ValueError("out of range: %r" % (value,))
    return value


def _json_number(v: Any) -> Any:
    if type(v) is float and not math.isfinite(v):
        if v != v:
            return "NaN"
        return "Infinity" if v > 0 else "-Infinity"
    return v


_second_text: Tuple[int, str] = (-1, "")  # the last second formatted: points share it


def rfc3339(t: float) -> str:
    """Unix time -> '2026-12-02T10:00:00.123Z' (UTC, milliseconds)."""
    global _second_text
    secs = int(t)
    ms = min(999, int((t - secs) * 1000))
    cached_secs, text = _second_text
    if cached_secs != secs:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
        _second_text = (secs, text)
    return "%s.%03dZ" % (text, ms)


class PyIntake:
    """Intake(capacity, wake): what Reporter.report() does on the training loop's thread.

    report() appends (number, time, step, total_steps, epoch, total_epochs, metrics) to
    a deque of `capacity` entries that drops the oldest when full, as they came, and
    calls wake() once `wake_at` entries are held; take() returns and removes them all.
    headway._intake.Intake does the same in C at a fraction of the cost (see
    sdk/python/src/intake.c) and is used where it is built; this is the fallback.
    """

    __slots__ = ("wake_at", "accepting", "last_totals", "_entries", "_append", "_wake",
                 "_numbers")

    def __init__(self, capacity: int, wake: Any) -> None:
        self._entries: "collections.deque[tuple]" = collections.deque(maxlen=capacity)
        self._append = self._entries.append  # atomic: no lock
        self._wake = wake
        self._numbers = itertools.count(1)  # next() is atomic: numbers every report()
        self.wake_at = 1
        self.accepting = False
        self.last_totals: Tuple[Any, Any] = (None, None)

    def report(self, /, step: Any, *, total_steps: Any = None, epoch: Any = None,
               total_epochs: Any = None, **metrics: Any) -> None:
        if not self.accepting:
            return
        self._append((next(self._numbers), _now(), step, total_steps, epoch, total_epochs,
                      metrics))
        if len(self._entries) >= self.wake_at:
            self._wake()
        if total_steps is not None or total_epochs is not None:
            self.last_totals = (total_steps, total_epochs)

    def take(self) -> List[tuple]:
        entries, taken = self._entries, []
        while True:
            try:
                taken.append(entries.popleft())
            except IndexError:
                return taken

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


try:
    from ._intake import Intake
except ImportError:  # not built: pip without a compiler, or sdk/python on PYTHONPATH
    Intake = PyIntake


class Reporter:
    """Sends progress points of one job to Headway from a background thread.

    Arguments (all optional; defaults from the environment, see the module docstring):
      url, job, token:  server base URL, job name, bearer token for this job.
      all_ranks:        report from every rank, not only rank 0 (default False).
      max_queue:        most points held while the server is slow or down (10000).
      batch_size:       most points per request (500).
      interval:         least seconds between the starts of two requests (0.5).
      request_timeout:  seconds before one HTTP request is given up and retried (10).
      min_backoff, max_backoff: retry delays in seconds (0.5, doubling up to 30).
      exit_timeout:     how long the atexit flush may take, in seconds (5).
      env:              mapping used instead of os.environ (for tests and embedding).
    Constructor arguments are configuration: an invalid one raises ValueError here,
    never later from report().
    """

    def __init__(self, url: Optional[str] = None, job: Optional[str] = None,
                 token: Optional[str] = None, *, all_ranks: bool = False,
                 max_queue: int = 10_000, batch_size: int = 500, interval: float = 0.5,
                 request_timeout: float = 10.0, min_backoff: float = 0.5,
                 max_backoff: float = 30.0, exit_timeout: float = 5.0,
                 env: Optional[Mapping[str, str]] = None) -> None:
        env = os.environ if env is None else env
        if max_queue < 1 or batch_size < 1:
            raise ValueError("max_queue and batch_size must be >= 1")
        if interval < 0 or request_timeout <= 0 or min_backoff < 0 or max_backoff < 0:
            raise ValueError("interval, timeouts and backoffs must be >= 0")
        self.url = (url if url is not None else env.get("HEADWAY_URL", "")).strip()
        self.job = (job if job is not None else env.get("HEADWAY_JOB", "")).strip()
        token = token if token is not None else env.get("HEADWAY_TOKEN", "")
        self.rank = rank_from_env(env)
        self._max_queue = int(max_queue)
        self._batch_size = int(batch_size)
        self._interval = float(interval)
        self._request_timeout = float(request_timeout)
        self._min_backoff = float(min_backoff)
        self._max_backoff = float(max_backoff)
        self._exit_timeout = float(exit_timeout)
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = "Bearer " + token.strip()
        self._path = "/api/v1/jobs/%s/progress" % quote(self.job, safe="")

        enabled = bool(self.url and self.job) and (all_ranks or self.rank == 0)
        if enabled:
            try:
                Transport(self.url, self._request_timeout)
            except ValueError as e:
                _log.warning("headway: reporting disabled, bad HEADWAY_URL: %s", e)
                enabled = False
        self.enabled = enabled
        self._warned: set = set()
        self._good_names: set = set()  # metric names already validated
        self._init_state()
        if enabled:
            _live.add(self)

    # -- state -------------------------------------------------------------------

    def _init_state(self) -> None:
        lock = threading.Lock()
        self._lock = lock
        self._work = threading.Condition(lock)   # the sender waits on it
        self._done = threading.Condition(lock)   # flush() waits on it
        # report() keeps each call in the intake, without a lock; the sender takes them,
        # validated, to _queue. The intake holds max_queue reports and drops the oldest.
        # It is the C one where headway._intake is built. Its wake_at is the intake
        # length at which the sender wants waking: 1 when it sleeps for want of points,
        # a full batch while it paces requests, never while it sends or once closed.
        # Its last_totals are the totals report() saw last: carried to the next point
        # kept when the intake dropped the points that held them.
        intake = Intake(self._max_queue, self._wake)
        intake.accepting = self.enabled  # report() returns at once when False
        self._intake = intake
        if type(self).report is Reporter.report:
            self.report = intake.report  # the loop calls the intake with no frame between
        self._taken = 0          # highest intake number moved to _queue so far
        self._drain_lock = threading.Lock()  # one drainer at a time keeps the order
        self._queue: "collections.deque[Tuple[int, Dict[str, Any]]]" = collections.deque()
        self._seq = 0            # sequence number of the last accepted point
        self._resolved = 0       # every point with seq <= this is acked/rejected/dropped
        self._last_rejected = 0  # highest seq of a batch the server rejected
        self._flush_base = 0     # target of the previous flush()
        self._flush_target = 0   # highest target of any flush() so far
        self._inflight = 0
        self._kick = False       # skip the interval / backoff wait once
        self._split_limit = self._batch_size  # lowered while bisecting a 413/400 batch
        self._split_hi = 0       # ... until every point up to this seq is resolved
        self._closed = False
        self._thread: Optional[threading.Thread] = None
        self._transport: Optional[Transport] = None
        self._atexit_registered = False
        self._stats = {"reported": 0, "sent": 0, "requests": 0, "failures": 0,
                       "dropped_coalesced": 0, "dropped_rejected": 0, "dropped_invalid": 0}

    def _reset_after_fork(self) -> None:
        closed = self._closed
        self._init_state()
        self._closed = closed
        self._intake.accepting = self.enabled and not closed

    def stats(self) -> Dict[str, int]:
        """Counters since construction, plus 'queued' (points waiting or in flight)."""
        self._drain()
        with self._lock:
            s = dict(self._stats)
            s["queued"] = len(self._queue) + self._inflight
        return s

    def _warn_once(self, key: Any, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._warned or len(self._warned) >= 256:
            _log.debug(msg, *args, exc_info=exc_info)
            return
        self._warned.add(key)
        _log.warning(msg, *args, exc_info=exc_info)

    # -- producer side -------------------------------------------------------------

    def report(self, /, step: Any, *, total_steps: Any = None, epoch: Any = None,
               total_epochs: Any = None, **metrics: Any) -> None:
        """Queues one progress point; returns at once, never raises. See the module doc."""
        # Instances call their intake's report() directly (see _init_state); this is
        # for subclasses and calls through the class.
        self._intake.report(step, total_steps=total_steps, epoch=epoch,
                           total_epochs=total_epochs, **metrics)

    def _wake(self) -> None:
        # Never waits for the lock: its holder is the sender, which drains the intake
        # before it next sleeps, or flush()/stats(), after which a sleeping sender looks
        # at the intake again within _IDLE_RECHECK seconds anyway.
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._closed:
                self._intake.clear()
                return
            self._intake.wake_at = _NEVER
            if self._thread is None:
                self._start_locked()
            else:
                self._work.notify()
        except Exception:  # never into the training loop
            self._warn_once("internal", "headway: report() failed to wake the sender",
                            exc_info=True)
        finally:
            self._lock.release()

    def _drain(self) -> None:
        """Moves what report() put in the intake, validated, to the send queue."""
        with self._drain_lock:
            intake = self._intake
            if not len(intake):
                return
            points = []
            dropped_invalid = 0
            lost = 0
            carry = False
            # Numbers missing between drains are points the full intake dropped; only
            # then, since with several reporting threads numbers may arrive out of order.
            full = len(intake) >= self._max_queue
            for number, now, step, total_steps, epoch, total_epochs, metrics in \
                    intake.take():
                if full and number > self._taken + 1:
                    lost += number - self._taken - 1
                    carry = True
                self._taken = max(self._taken, number)
                try:
                    point = self._make_point(now, step, total_steps, epoch, total_epochs,
                                             metrics)
                except Exception:
                    point = None
                    self._warn_once("internal", "headway: a progress point could not be "
                                    "read; dropped", exc_info=True)
                if point is None:
                    dropped_invalid += 1
                    continue
                if carry:
                    carry = False
                    self._carry_totals(point)
                points.append(point)
            with self._lock:
                self._stats["dropped_invalid"] += dropped_invalid
                self._stats["dropped_coalesced"] += lost
                if self._closed:
                    return
                q = self._queue
                for point in points:
                    self._seq += 1
                    q.append((self._seq, point))
                self._stats["reported"] += len(points)
                if len(q) > self._max_queue:
                    self._trim_locked()
            if lost:
                self._warn_once("coalesce", "headway: server not keeping up; dropping "
                                "oldest queued progress points (the latest is always kept)")

    def _carry_totals(self, point: Dict[str, Any]) -> None:
        """After intake drops: the totals last reported, onto a point without its own."""
        total_steps, total_epochs = self._intake.last_totals
        if total_steps is not None and "total_steps" not in point:
            try:
                v = _as_step(total_steps)
                if v >= 1:
                    point["total_steps"] = v
            except Exception:
                pass
        if total_epochs is not None and "total_epochs" not in point:
            try:
                v = as_number(total_epochs)
                if math.isfinite(v) and v >= 0:
                    point["total_epochs"] = v
            except Exception:
                pass

    def _make_point(self, now: float, step: Any, total_steps: Any, epoch: Any,
                    total_epochs: Any, metrics: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        try:
            step = _as_step(step)
        except Exception:
            self._warn_once("step", "headway: dropping report with invalid step %r "
                            "(need an integer >= 0)", step)
            return None
        point: Dict[str, Any] = {"step": step, "time": now}
        if total_steps is not None:
            try:
                v = _as_step(total_steps)
                if v < 1:
                    raise ValueError(v)
                point["total_steps"] = v
            except Exception:
                self._warn_once("total_steps", "headway: ignoring invalid total_steps %r",
                                total_steps)
        for name, value in (("epoch", epoch), ("total_epochs", total_epochs)):
            if value is None:
                continue
            try:
                v = as_number(value)
                if not math.isfinite(v) or v < 0:
                    raise ValueError(value)
                point[name] = v
            except Exception:
                self._warn_once(name, "headway: ignoring invalid %s %r", name, value)
        if metrics:
            out = {}
            good = self._good_names
            for name, value in metrics.items():
                if value is None:
                    continue
                if name not in good:
                    if not _METRIC_NAME.fullmatch(name):
                        self._warn_once(("name", name), "headway: dropping metric %r: names "
                                        "are 1-128 of A-Z a-z 0-9 _ . / -", name)
                        continue
                    if len(good) < 4096:
                        good.add(name)
                try:
                    out[name] = as_number(value)
                except Exception:
                    self._warn_once(("metric", name), "headway: dropping metric %r: "
                                    "value %r is not a number", name, value)
            if len(out) > MAX_METRICS_PER_REPORT:
                self._warn_once("too_many", "headway: a report carries at most %d metrics; "
                                "dropping the rest", MAX_METRICS_PER_REPORT)
                out = dict(list(out.items())[:MAX_METRICS_PER_REPORT])
            if out:
                point["metrics"] = out
        return point

    def _trim_locked(self) -> None:
        q = self._queue
        while len(q) > self._max_queue:
            _, dropped = q.popleft()
            nxt = q[0][1]
            for k in ("total_steps", "total_epochs"):
                if k in dropped and k not in nxt:
                    nxt[k] = dropped[k]
            self._stats["dropped_coalesced"] += 1
        self._warn_once("coalesce", "headway: server not keeping up; dropping oldest "
                        "queued progress points (the latest is always kept)")

    def _start_locked(self) -> None:
        self._transport = Transport(self.url, self._request_timeout)
        t = threading.Thread(target=self._run, name="headway-reporter", daemon=True)
        self._thread = t
        t.start()
        if not self._atexit_registered:
            atexit.register(self._atexit)
            self._atexit_registered = True

    # -- flush / close -------------------------------------------------------------

    def flush(self, timeout: Optional[float] = 5.0) -> bool:
        """Waits until every point reported before the call is resolved.

        Returns True if they were all acknowledged by the server (points superseded under
        the coalescing policy count as handled); False if `timeout` seconds (None: no
        limit) passed first, or if the server rejected (4xx) any point reported since the
        previous flush(). A disabled reporter returns True at once. Never raises.
        """
        if not self.enabled:
            return True
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        self._drain()
        with self._lock:
            target = self._seq
            base, self._flush_base = self._flush_base, max(self._flush_base, target)
            self._flush_target = max(self._flush_target, target)
            if self._thread is None and not self._closed and self._queue:
                self._start_locked()  # report() found the lock taken when it would have
            if self._resolved < target:
                self._kick = True
                self._work.notify()
            while self._resolved < target:
                if self._closed and self._thread is None:
                    return False
                if deadline is None:
                    self._done.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._done.wait(remaining)
            return not (base < self._last_rejected <= target)

    def close(self, timeout: Optional[float] = 5.0) -> bool:
        """Flushes (bounded by `timeout`), then stops the sender. Later reports are
        ignored. Returns flush()'s result. Idempotent."""
        ok = self.flush(timeout)
        with self._lock:
            self._closed = True
            self._intake.accepting = False
            self._intake.clear()
            self._work.notify_all()
            self._done.notify_all()
            thread, transport = self._thread, self._transport
            registered, self._atexit_registered = self._atexit_registered, False
        if registered:
            try:
                atexit.unregister(self._atexit)
            except Exception:
                pass
        if thread is not None and thread.is_alive() and transport is not None:
            transport.abort()  # unblock a request waiting on a silent server
            thread.join(0.5)
        return ok

    def _atexit(self) -> None:
        try:
            if not self.close(self._exit_timeout):
                s = self.stats()
                _log.warning("headway: exiting with %d progress point(s) not delivered",
                             s["queued"])
        except Exception:
            pass

    # -- sender thread -------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        last_start = -1e18
        while True:
            try:
                batch = self._next_batch(last_start)
                if batch is None:
                    break
                n = len(batch)
                with self._lock:
                    transport = self._transport
                last_start = time.monotonic()
                outcome, detail, retry_after = self._send(transport, batch)
                # log before flush() waiters can see the outcome, outside the lock
                if outcome == _REJECT:
                    self._warn_once(("rejected", detail), "headway: server rejected "
                                    "%d progress point(s), not retrying: %s", n, detail)
                elif outcome == _OK and failures:
                    _log.info("headway: progress reporting recovered after %d failed "
                              "attempt(s)", failures)
                with self._lock:
                    self._inflight = 0
                    self._stats["requests"] += 1
                    hi = batch[-1][0]
                    if outcome == _SPLIT:
                        # too large, or one bad point: resend in halves, no backoff
                        self._queue.extendleft(reversed(batch))
                        self._split_limit = max(1, n // 2)
                        self._split_hi = max(self._split_hi, hi)
                        continue
                    if outcome == _RETRY:
                        failures += 1
                        self._stats["failures"] += 1
                        self._queue.extendleft(reversed(batch))
                        if len(self._queue) > self._max_queue:
                            self._trim_locked()
                        delay = min(self._max_backoff,
                                    self._min_backoff * (2 ** min(failures - 1, 30)))
                        delay *= random.uniform(0.5, 1.0)
                        if retry_after is not None:
                            delay = min(self._max_backoff, max(delay, retry_after))
                    else:
                        self._resolved = max(self._resolved, hi)
                        if self._resolved >= self._split_hi:
                            self._split_limit = self._batch_size
                        if outcome == _OK:
                            self._stats["sent"] += n
                        else:
                            self._stats["dropped_rejected"] += n
                            self._last_rejected = max(self._last_rejected, hi)
                        failures = 0
                        self._done.notify_all()
                if outcome == _RETRY:  # log outside the lock, then back off
                    if failures == 1:
                        _log.warning("headway: progress report failed (%s); retrying "
                                     "in the background", detail)
                    else:
                        _log.debug("headway: progress report failed (%s), attempt %d",
                                   detail, failures)
                    self._back_off(time.monotonic() + delay)
                    continue
            except Exception:  # keep the sender alive whatever happens
                self._warn_once("sender", "headway: internal error in the reporter thread",
                                exc_info=True)
                time.sleep(0.5)
        with self._lock:
            self._thread = None
            self._done.notify_all()
        if self._transport is not None:
            self._transport.close()

    def _next_batch(self, last_start: float) -> Optional[List[Tuple[int, Dict[str, Any]]]]:
        """Waits for points and for the interval; the batch to send, or None once closed.

        Every wait lets report() wake the sender (see report()), and every wake first
        moves the intake to the queue, so the intake stays small while requests are paced.
        """
        while True:
            self._drain()
            with self._lock:
                if self._closed:
                    return None
                if not self._queue:
                    self._intake.wake_at = 1
                    if not len(self._intake):  # after setting wake_at: see PyIntake.report()
                        self._work.wait(_IDLE_RECHECK)
                    self._intake.wake_at = _NEVER
                    continue
                # The interval only gathers small batches: a full batch, a pending
                # flush() or a kick sends at once.
                if (self._interval > 0 and not self._kick
                        and len(self._queue) < self._batch_size
                        and self._resolved >= self._flush_target):
                    remaining = last_start + self._interval - time.monotonic()
                    if remaining > 0:
                        self._intake.wake_at = max(1, self._batch_size - len(self._queue))
                        if len(self._intake) < self._intake.wake_at:
                            self._work.wait(remaining)
                        self._intake.wake_at = _NEVER
                        continue
                self._kick = False
                n = min(len(self._queue), self._split_limit)
                batch = [self._queue.popleft() for _ in range(n)]
                self._inflight = n
                return batch

    def _back_off(self, end: float) -> None:
        """Waits until `end` (or a kick or close), moving the intake along meanwhile."""
        while True:
            self._drain()
            with self._lock:
                remaining = end - time.monotonic()
                if self._closed or self._kick or remaining <= 0:
                    return
                self._intake.wake_at = self._batch_size
                if len(self._intake) < self._intake.wake_at:
                    self._work.wait(remaining)
                self._intake.wake_at = _NEVER

    def _send(self, transport: Transport, batch: List[Tuple[int, Dict[str, Any]]]
              ) -> Tuple[int, str, Optional[float]]:
        try:
            reports = [self._encode(p) for _, p in batch]
            doc = reports[0] if len(reports) == 1 else {"reports": reports}
            body = json.dumps(doc, allow_nan=False, separators=(",", ":")).encode("utf-8")
        except Exception as e:  # cannot happen for validated points; never loop on it
            return _REJECT, "cannot encode: %s" % e, None
        if len(body) > MAX_BODY_BYTES and len(batch) > 1:
            return _SPLIT, "", None
        try:
            status, headers, data = transport.request("POST", self._path, body,
                                                      self._headers, idempotent=True)
        except Exception as e:
            return _RETRY, "%s: %s" % (type(e).__name__, e), None
        if 200 <= status < 300:
            return _OK, "", None
        detail = "HTTP %d" % status
        try:
            err = json.loads(data.decode("utf-8")).get("error") or {}
            if err.get("code") or err.get("message"):
                detail += " %s: %s" % (err.get("code", ""), err.get("message", ""))
        except Exception:
            pass
        if status == 429 or status >= 500:
            retry_after = None
            try:
                ra = headers.get("Retry-After")
                if ra is not None:
                    retry_after = max(0.0, float(ra))
            except (TypeError, ValueError):
                pass
            return _RETRY, detail, retry_after
        if status in (400, 413) and len(batch) > 1:
            return _SPLIT, detail, None  # isolate the point the server refuses
        return _REJECT, detail, None

    @staticmethod
    def _encode(point: Dict[str, Any]) -> Dict[str, Any]:
        out = dict(point)
        out["time"] = rfc3339(point["time"])
        m = point.get("metrics")
        if m:
            out["metrics"] = {k: _json_number(v) for k, v in m.items()}
        return out


# -- the process-wide default reporter -------------------------------------------------

_default: Optional[Reporter] = None
_default_lock = threading.Lock()


def default_reporter() -> Reporter:
    """The reporter used by headway.report()/flush(), created from the environment."""
    global _default
    r = _default
    if r is None:
        with _default_lock:
            if _default is None:
                _default = Reporter()
            r = _default
    return r


def init(**options: Any) -> Reporter:
    """Replaces the default reporter with Reporter(**options), e.g. init(all_ranks=True).
    The previous one is flushed briefly (1 s at most) and closed."""
    global _default
    new = Reporter(**options)
    with _default_lock:
        old, _default = _default, new
    if old is not None:
        old.close(timeout=1.0)
    return new


def _set_default(reporter: Optional[Reporter]) -> Optional[Reporter]:
    """Internal/testing: swaps the default reporter without closing the old one."""
    global _default
    with _default_lock:
        old, _default = _default, reporter
    return old


def report(step: Any, *, total_steps: Any = None, epoch: Any = None,
           total_epochs: Any = None, **metrics: Any) -> None:
    """Reports one progress point through the default reporter (see Reporter.report)."""
    (_default or default_reporter()).report(step, total_steps=total_steps, epoch=epoch,
                                            total_epochs=total_epochs, **metrics)


def flush(timeout: Optional[float] = 5.0) -> bool:
    """Flushes the default reporter (see Reporter.flush)."""
    return (_default or default_reporter()).flush(timeout)
