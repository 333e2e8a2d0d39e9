"""A training job that reports the way HF Transformers' `KubeflowCallback` does,
standard library only: the same environment variables (KUBEFLOW_TRAINER_SERVER_URL,
_TOKEN, _CA_CERT), the same urllib/ssl calls and the same JSON, driven through
train begin, logged steps, evaluations and train end. Run by test_kubeflow.py as a
Headway job; prints `STATUSES ...` (the HTTP status of every update) and exits 1
if any update was refused."""

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone


class State:
    """The part of transformers.TrainerState the callback reads."""

    def __init__(self, max_steps):
        self.global_step = 0
        self.max_steps = max_steps
        self.epoch = 0.0
        self.is_world_process_zero = True


class KubeflowCallback:
    """The shape of transformers.integrations.KubeflowCallback."""

    _MIN_UPDATE_INTERVAL = 0.0  # 5.0 in transformers; every update is sent here
    _ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
    _ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
    _ENV_TOKEN_PATH = "KUBEFLOW_TRAINER_SERVER_TOKEN"

    def __init__(self):
        self._initialized = False
        self._metrics = {}
        self._start_time = None
        self._last_update_time = 0.0
        self.statuses = []

    def _get_ssl_context(self):
        ca_file = os.environ.get(self._ENV_CA_CERT)
        return ssl.create_default_context(cafile=ca_file) if ca_file else None

    def _get_token(self):
        with open(os.environ[self._ENV_TOKEN_PATH]) as f:
            return f.read().strip()

    def _update_status(self, progress_percent=None, estimated_time_remaining=None, metrics=None,
                       force=False):
        url = os.environ.get(self._ENV_SERVER_URL)
        now = time.monotonic()
        if not force and (now - self._last_update_time) < self._MIN_UPDATE_INTERVAL:
            return
        self._last_update_time = now
        trainer_status = {"lastUpdatedTime": datetime.now(timezone.utc).isoformat()}
        if progress_percent is not None:
            trainer_status["progressPercentage"] = max(0, min(100, progress_percent))
        if estimated_time_remaining is not None:
            trainer_status["estimatedRemainingSeconds"] = max(0, int(estimated_time_remaining))
        if metrics:
            trainer_status["metrics"] = [{"name": str(k), "value": str(v)} for k, v in metrics.items()]
        data = json.dumps({"trainerStatus": trainer_status}).encode("utf-8")
        headers = {"Authorization": "Bearer " + self._get_token(),
                   "Content-Type": "application/json"}
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=5, context=self._get_ssl_context()) as resp:
                self.statuses.append(resp.status)
        except urllib.error.HTTPError as e:
            self.statuses.append(e.code)
            print("refused:", e.code, e.read().decode(errors="replace"), file=sys.stderr)

    def on_train_begin(self, state):
        self._start_time = time.time()
        self._metrics = {}
        self._initialized = True
        self._update_status(progress_percent=0,
                            metrics={"total_steps": state.max_steps} if state.max_steps else None,
                            force=True)

    def on_log(self, state, logs):
        for key, value in logs.items():
            if isinstance(value, (int, float)):
                self._metrics[key] = value

    def on_step_end(self, state):
        progress = min(int((state.global_step / state.max_steps) * 100), 99)
        elapsed = time.time() - self._start_time
        eta_seconds = int(elapsed / state.global_step * (state.max_steps - state.global_step))
        metrics = {**self._metrics, "current_step": state.global_step,
                   "total_steps": state.max_steps, "current_epoch": round(state.epoch, 2)}
        self._update_status(progress_percent=progress, estimated_time_remaining=eta_seconds,
                            metrics=metrics)

    def on_train_end(self, state):
        self._update_status(progress_percent=100, estimated_time_remaining=0,
                            metrics=self._metrics, force=True)


def main():
    max_steps, steps_per_epoch, log_every, eval_every = 40, 20, 5, 20
    state = State(max_steps)
    callback = KubeflowCallback()
    callback.on_train_begin(state)
    for step in range(1, max_steps + 1):
        time.sleep(0.03)
        state.global_step = step
        state.epoch = step / steps_per_epoch
        if step % log_every == 0:
            callback.on_log(state, {"loss": round(2.0 / step, 4), "grad_norm": 1.0 + step / 100,
                                    "learning_rate": 5e-5 * (1 - step / max_steps),
                                    "epoch": state.epoch})
        if step % eval_every == 0:
            callback.on_log(state, {"eval_loss": round(1.0 / step, 4),
                                    "eval_f1 (macro)": 0.5 + step / 100,
                                    "eval_runtime": 0.25, "eval_is_best": True,
                                    "epoch": state.epoch})
        callback.on_step_end(state)
    callback.on_log(state, {"train_runtime": 1.5, "train_loss": 0.3, "epoch": state.epoch})
    callback.on_train_end(state)
    print("STATUSES", " ".join(str(s) for s in callback.statuses))
    sys.exit(0 if callback.statuses and all(s == 200 for s in callback.statuses) else 1)


if __name__ == "__main__":
    main()
