"""Framework adapters. transformers and lightning are not installed on this machine, so
these tests drive the callbacks with simple fake `state` / `trainer` objects that carry
the attributes the real frameworks provide; the callbacks are then plain classes."""

from types import SimpleNamespace

import pytest

from headway.callbacks import HeadwayCallback, LightningCallback


class FakeReporter:
    def __init__(self):
        self.reports = []
        self.flushes = []

    def report(self, step, **kw):
        kw = {k: v for k, v in kw.items() if v is not None}
        self.reports.append((step, kw))

    def flush(self, timeout=None):
        self.flushes.append(timeout)
        return True


class FakeTensor:  # what Lightning's callback_metrics hold
    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


def hf_state(**kw):
    base = dict(global_step=10, max_steps=100, epoch=0.5, num_train_epochs=3,
                is_world_process_zero=True)
    base.update(kw)
    return SimpleNamespace(**base)


def test_hf_on_log_reports_step_totals_and_numeric_logs():
    rep = FakeReporter()
    cb = HeadwayCallback(reporter=rep)
    cb.on_log(None, hf_state(), None, logs={
        "loss": 0.5, "learning_rate": 1e-4, "grad_norm": 2.0, "epoch": 0.5,
        "train_samples_per_second": 812.0, "note": "text", "nothing": None})
    assert rep.reports == [(10, {"total_steps": 100, "epoch": 0.5, "total_epochs": 3.0,
                                 "loss": 0.5, "learning_rate": 1e-4, "grad_norm": 2.0,
                                 "samples_per_second": 812.0})]


def test_hf_evaluate_begin_end_and_throttled_steps():
    rep = FakeReporter()
    cb = HeadwayCallback(reporter=rep, step_interval=3600, flush_timeout=2.5)
    cb.on_train_begin(None, hf_state(global_step=0), None)
    cb.on_step_end(None, hf_state(global_step=1), None)
    cb.on_step_end(None, hf_state(global_step=2), None)  # throttled
    cb.on_evaluate(None, hf_state(global_step=2), None, metrics={"eval_loss": 0.7,
                                                                "eval_runtime": 1.5})
    cb.on_train_end(None, hf_state(global_step=100, epoch=3.0), None)
    steps = [s for s, _ in rep.reports]
    assert steps == [0, 1, 2, 100]
    assert rep.reports[2][1]["eval_loss"] == 0.7 and rep.reports[2][1]["eval_runtime"] == 1.5
    assert rep.flushes == [2.5]


def test_hf_skips_non_zero_process_and_missing_fields():
    rep = FakeReporter()
    cb = HeadwayCallback(reporter=rep, step_interval=0)
    cb.on_log(None, hf_state(is_world_process_zero=False), None, logs={"loss": 1.0})
    assert rep.reports == []
    cb.on_step_end(None, SimpleNamespace(global_step=5), None)  # no max_steps/epoch
    cb.on_step_end(None, hf_state(max_steps=-1, epoch=None), None)
    assert rep.reports == [(5, {}), (10, {"total_epochs": 3.0})]


def test_hf_callback_reports_through_a_real_reporter(server, make_reporter):
    r = make_reporter(server.url)
    cb = HeadwayCallback(reporter=r)
    cb.on_log(None, hf_state(), None, logs={"loss": float("nan")})
    cb.on_train_end(None, hf_state(global_step=100), None)
    steps = [p["step"] for p in server.points()]
    assert steps[0] == 10 and steps[-1] == 100
    assert server.points()[0]["metrics"] == {"loss": "NaN"}


def pl_trainer(**kw):
    base = dict(global_step=40, max_steps=-1, estimated_stepping_batches=400,
                current_epoch=1, max_epochs=10, num_training_batches=40,
                is_global_zero=True, sanity_checking=False,
                callback_metrics={"train_loss": FakeTensor(0.3), "acc": 0.9})
    base.update(kw)
    return SimpleNamespace(**base)


def test_lightning_batch_end_reports_fractional_epoch_and_tensor_metrics():
    rep = FakeReporter()
    cb = LightningCallback(reporter=rep, step_interval=0)
    cb.on_train_batch_end(pl_trainer(), None, None, None, 19)
    assert rep.reports == [(40, {"total_steps": 400, "epoch": 1.5, "total_epochs": 10,
                                 "train_loss": 0.3, "acc": 0.9})]


def test_lightning_max_steps_validation_and_end():
    rep = FakeReporter()
    cb = LightningCallback(reporter=rep, step_interval=3600, flush_timeout=1.0)
    cb.on_validation_end(pl_trainer(sanity_checking=True), None)  # skipped
    cb.on_train_batch_end(pl_trainer(max_steps=1000, max_epochs=None), None, None, None, 0)
    cb.on_train_batch_end(pl_trainer(), None, None, None, 1)  # throttled
    cb.on_validation_end(pl_trainer(callback_metrics={"val_loss": FakeTensor(0.8)}), None)
    cb.on_train_end(pl_trainer(global_step=400), None)
    assert [s for s, _ in rep.reports] == [40, 40, 400]
    assert rep.reports[0][1]["total_steps"] == 1000 and "total_epochs" not in rep.reports[0][1]
    assert rep.reports[1][1] == {"total_steps": 400, "epoch": 1.0, "total_epochs": 10,
                                 "val_loss": 0.8}
    assert rep.flushes == [1.0]


def test_lightning_skips_non_zero_rank_and_survives_odd_trainers():
    rep = FakeReporter()
    cb = LightningCallback(reporter=rep, step_interval=0)
    cb.on_train_batch_end(pl_trainer(is_global_zero=False), None, None, None, 0)
    assert rep.reports == []
    cb.on_validation_end(SimpleNamespace(), None)  # no attributes at all: no report
    assert rep.reports == []
    cb.on_validation_end(SimpleNamespace(global_step=3, callback_metrics=None), None)
    assert rep.reports == [(3, {})]
