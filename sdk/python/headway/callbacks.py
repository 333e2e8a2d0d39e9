"""Framework adapters: report training progress to Headway without touching the loop.

    from headway.callbacks import HeadwayCallback, LightningCallback
    Trainer(..., callbacks=[HeadwayCallback()])           # Hugging Face Transformers
    pl.Trainer(..., callbacks=[LightningCallback()])      # PyTorch Lightning

The frameworks are imported only if installed: HeadwayCallback subclasses
transformers.TrainerCallback when transformers is importable, and LightningCallback
subclasses lightning.pytorch.Callback and/or pytorch_lightning.Callback when importable
(Lightning checks isinstance). Otherwise they are plain classes with the same methods.

Both report through `reporter` (default: the process-wide headway reporter), so they
inherit its contract: non-blocking, never raising, rank 0 only, no-op outside Headway.
They also skip non-zero ranks by the framework's own flag (state.is_world_process_zero,
trainer.is_global_zero). Step-only reports from per-step hooks are throttled to one per
`step_interval` seconds (default 1 s; 0 reports every step); reports that carry metrics
(logging, evaluation) are never throttled. At the end of training they flush for at most
`flush_timeout` seconds.
"""

from __future__ import annotations

import importlib.util
import math
import time
from typing import Any, Dict, Optional, Tuple

from . import reporter as _reporter_mod

# HF log keys renamed to Headway's metric names.
HF_RENAME = {"train_samples_per_second": "samples_per_second"}


def _find(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _hf_base() -> Tuple[type, ...]:
    if _find("transformers"):
        try:
            from transformers import TrainerCallback  # type: ignore
            return (TrainerCallback,)
        except Exception:
            pass
    return (object,)


def _lightning_bases() -> Tuple[type, ...]:
    bases = []
    if _find("lightning"):
        try:
            from lightning.pytorch import Callback  # type: ignore
            bases.append(Callback)
        except Exception:
            pass
    if _find("pytorch_lightning"):
        try:
            from pytorch_lightning import Callback as PLCallback  # type: ignore
            if PLCallback not in bases:
                bases.append(PLCallback)
        except Exception:
            pass
    return tuple(bases) or (object,)


def _number(v: Any) -> Optional[Any]:
    try:
        return _reporter_mod.as_number(v)
    except Exception:
        return None


def _positive_int(v: Any) -> Optional[int]:
    n = _number(v)
    if n is None or isinstance(n, float) and not math.isfinite(n):
        return None
    n = int(n)
    return n if n > 0 else None


def _nonneg_float(v: Any) -> Optional[float]:
    n = _number(v)
    if n is None:
        return None
    n = float(n)
    return n if math.isfinite(n) and n >= 0 else None


def _metrics(d: Any, rename: Dict[str, str]) -> Dict[str, Any]:
    """Numeric entries of a mapping, reserved names dropped, some renamed."""
    out: Dict[str, Any] = {}
    if not d:
        return out
    try:
        items = list(d.items())
    except Exception:
        return out
    for key, value in items:
        key = rename.get(str(key), str(key))
        if key in _reporter_mod.RESERVED:
            continue
        n = _number(value)
        if n is not None:
            out[key] = n
    return out


class _Base:
    def __init__(self, reporter: Optional[Any] = None, *, step_interval: float = 1.0,
                 flush_timeout: float = 5.0) -> None:
        self._headway_reporter = reporter
        self._step_interval = step_interval
        self._flush_timeout = flush_timeout
        self._last_step_report = -math.inf

    def _reporter(self) -> Any:
        return self._headway_reporter or _reporter_mod.default_reporter()

    def _due(self) -> bool:
        now = time.monotonic()
        if now - self._last_step_report < self._step_interval:
            return False
        self._last_step_report = now
        return True

    def _flush(self) -> None:
        try:
            self._reporter().flush(self._flush_timeout)
        except Exception:
            pass


class HeadwayCallback(_Base, *_hf_base()):  # type: ignore[misc]
    """Hugging Face Transformers TrainerCallback reporting to Headway.

    Reports state.global_step with state.max_steps, state.epoch, state.num_train_epochs
    and the numeric entries of `logs` / eval `metrics` (loss, eval_loss, learning_rate,
    grad_norm, ...; train_samples_per_second is sent as samples_per_second).
    """

    def __init__(self, reporter: Optional[Any] = None, *, step_interval: float = 1.0,
                 flush_timeout: float = 5.0) -> None:
        _Base.__init__(self, reporter, step_interval=step_interval,
                       flush_timeout=flush_timeout)

    def _report(self, state: Any, metrics: Dict[str, Any]) -> None:
        try:
            if getattr(state, "is_world_process_zero", True) is False:
                return
            step = getattr(state, "global_step", None)
            if step is None:
                return
            self._reporter().report(
                step,
                total_steps=_positive_int(getattr(state, "max_steps", None)),
                epoch=_nonneg_float(getattr(state, "epoch", None)),
                total_epochs=_nonneg_float(getattr(state, "num_train_epochs", None)) or None,
                **metrics)
        except Exception:
            pass

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._report(state, {})

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._due():
            self._report(state, {})

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
               **kwargs: Any) -> None:
        self._report(state, _metrics(logs, HF_RENAME))

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None,
                    **kwargs: Any) -> None:
        self._report(state, _metrics(metrics, HF_RENAME))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._report(state, {})
        self._flush()


class LightningCallback(_Base, *_lightning_bases()):  # type: ignore[misc]
    """PyTorch Lightning callback reporting to Headway.

    Reports trainer.global_step with trainer.max_steps (or, when unset, a finite
    trainer.estimated_stepping_batches), the fractional epoch (current_epoch plus the
    fraction of trainer.num_training_batches done), trainer.max_epochs, and the numeric
    trainer.callback_metrics (tensors converted with .item()). Metrics are read at most
    once per step_interval during training and always after validation (not during the
    sanity check).
    """

    def __init__(self, reporter: Optional[Any] = None, *, step_interval: float = 1.0,
                 flush_timeout: float = 5.0) -> None:
        _Base.__init__(self, reporter, step_interval=step_interval,
                       flush_timeout=flush_timeout)

    def _report(self, trainer: Any, batch_idx: Optional[int] = None) -> None:
        try:
            if getattr(trainer, "is_global_zero", True) is False:
                return
            step = getattr(trainer, "global_step", None)
            if step is None:
                return
            total = _positive_int(getattr(trainer, "max_steps", None))
            if total is None:
                try:
                    total = _positive_int(getattr(trainer, "estimated_stepping_batches", None))
                except Exception:
                    total = None
            epoch = _nonneg_float(getattr(trainer, "current_epoch", None))
            if epoch is not None and batch_idx is not None:
                nb = _nonneg_float(getattr(trainer, "num_training_batches", None))
                if nb:
                    epoch += min(1.0, (batch_idx + 1) / nb)
            self._reporter().report(
                step, total_steps=total, epoch=epoch,
                total_epochs=_positive_int(getattr(trainer, "max_epochs", None)),
                **_metrics(getattr(trainer, "callback_metrics", None), {}))
        except Exception:
            pass

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int, *args: Any, **kwargs: Any) -> None:
        if self._due():
            self._report(trainer, batch_idx)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "sanity_checking", False):
            return
        self._report(trainer)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._report(trainer)
        self._flush()
