"""The intake: what report() does on the training loop's thread, in C (headway._intake,
where built) and in Python (PyIntake). Both must keep calls alike; the reporter tests
run with each (see conftest.py)."""

import gc
import glob
import os
import time
import weakref

import pytest

from conftest import BUILT_PACKAGE, INTAKES
import headway
from headway import reporter as reporter_mod


def test_the_compiled_intake_is_used_where_it_is_built():
    built = glob.glob(os.path.join(BUILT_PACKAGE, "headway", "_intake*.so"))
    if os.environ.get("HEADWAY_BIN"):  # scripts/test: the build must have made it
        assert built, "no headway/_intake*.so under %s" % BUILT_PACKAGE
    if built:
        assert reporter_mod.Intake is not reporter_mod.PyIntake
        assert "c-intake" in INTAKES


@pytest.fixture(params=sorted(INTAKES))
def intake_type(request):
    return INTAKES[request.param]


def _entries(taken):
    """take()'s tuples without their times; no metrics read alike as None or {}."""
    return [(n, step, ts, ep, te, m or None) for n, _, step, ts, ep, te, m in taken]


def test_calls_are_kept_as_they_came_and_the_oldest_dropped_when_full(intake_type):
    woken = []
    intake = intake_type(3, lambda: woken.append(len(intake)))
    intake.report(0, loss=1.0)  # not accepting yet: ignored
    assert len(intake) == 0 and woken == []
    intake.accepting = True
    intake.wake_at = 2
    before = time.time()
    intake.report(1, loss=0.5)
    assert woken == []
    intake.report(2, total_steps=10, epoch=0.25, loss=0.4, lr=3e-4)
    assert woken == [2]
    intake.wake_at = reporter_mod._NEVER
    intake.report(step=3, total_epochs=4)
    intake.report(4, total_steps=None)  # a None total leaves the last totals as they were
    assert len(intake) == 3
    assert intake.last_totals == (None, 4)
    taken = intake.take()
    assert len(intake) == 0 and intake.take() == []
    assert _entries(taken) == [
        (2, 2, 10, 0.25, None, {"loss": 0.4, "lr": 3e-4}),
        (3, 3, None, None, 4, None),
        (4, 4, None, None, None, None),
    ]
    assert all(before - 1 <= t <= time.time() + 1 for _, t, *_ in taken)
    intake.report(5)
    intake.clear()
    assert len(intake) == 0 and intake.take() == []


def test_a_bad_signature_raises_type_error_as_a_python_function_would(intake_type):
    intake = intake_type(10, lambda: None)
    intake.accepting = True
    intake.wake_at = reporter_mod._NEVER
    for call in (lambda: intake.report(), lambda: intake.report(1, 2),
                 lambda: intake.report(1, step=2), lambda: intake.report(loss=1.0)):
        with pytest.raises(TypeError):
            call()
    assert len(intake) == 0


def test_names_built_at_run_time_read_as_written_ones(server, make_reporter):
    r = make_reporter(server.url)
    step, total, loss = "".join(["st", "ep"]), "".join(["total_", "steps"]), "".join("loss")
    r.report(**{step: 4, total: 10, loss: 2.0, "acc": 0.5})
    r.report(step=5)
    assert r.flush(5)
    points = server.points()
    assert [(p["step"], p.get("total_steps"), p.get("metrics")) for p in points] == [
        (4, 10, {"loss": 2.0, "acc": 0.5}), (5, None, None)]


def test_a_reporter_dropped_unclosed_is_freed_with_what_it_held(intake):
    r = headway.Reporter(url="http://127.0.0.1:9", job="j", token="t", env={})
    r._intake.wake_at = reporter_mod._NEVER  # no sender thread: it would hold r
    r.report(1, me=r)  # a cycle through a held report as well as through the intake
    gone = weakref.ref(r)
    del r
    gc.collect()
    assert gone() is None


@pytest.mark.skipif("c-intake" not in INTAKES, reason="the C intake is not built")
def test_a_c_intake_never_initialised_ignores_reports():
    intake = INTAKES["c-intake"].__new__(INTAKES["c-intake"])
    intake.accepting = True
    assert intake.report(1, loss=1.0) is None
    assert len(intake) == 0 and intake.take() == []
    with pytest.raises(RuntimeError):
        intake.__init__(4, lambda: None)
        intake.__init__(4, lambda: None)  # once only


def test_a_forked_child_reports_through_an_intake_of_its_own(server, make_reporter):
    r = make_reporter(server.url)
    r._intake.wake_at = reporter_mod._NEVER  # the parent's reports wait in its intake
    for step in range(5):
        r.report(step, loss=1.0)
    pid = os.fork()
    if pid == 0:  # the child: none of the parent's reports, its own delivered
        try:
            held = len(r._intake)
            r.report(100, loss=2.0)
            os._exit(0 if held == 0 and r.flush(5) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert [p["step"] for p in server.points()] == [100]
    assert r.flush(5)
    assert sorted(p["step"] for p in server.points()) == [0, 1, 2, 3, 4, 100]
