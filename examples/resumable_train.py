"""A training loop that survives preemption.

When the scheduler preempts a job (a higher-priority job or a team reclaiming its quota needs
the GPUs), Headway first sends the checkpoint warning (SIGUSR1; headway.should_checkpoint()
turns True), waits the preemption grace, then sends SIGTERM. The job is requeued and its next
attempt starts with the same $HEADWAY_CHECKPOINT_DIR, so it resumes where it left off.

Run it with examples/resumable-train.yaml. STEPS and STEP_SECONDS set the length of the run.
"""

import json
import os
import sys
import time

import headway

total = int(os.environ.get("STEPS", "200"))
step_seconds = float(os.environ.get("STEP_SECONDS", "0.1"))
checkpoint = os.path.join(os.environ.get("HEADWAY_CHECKPOINT_DIR", "."), "state.json")


def save(step: int, loss: float) -> None:
    # Write then rename, so a kill mid-write never leaves a torn checkpoint.
    tmp = checkpoint + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"step": step, "loss": loss}, f)
    os.replace(tmp, checkpoint)


start, loss = 0, 2.0
if os.path.exists(checkpoint):
    with open(checkpoint) as f:
        state = json.load(f)
    start, loss = state["step"], state["loss"]
    print(f"resumed from step {start} (attempt {os.environ.get('HEADWAY_ATTEMPT', '0')})", flush=True)

for step in range(start + 1, total + 1):
    time.sleep(step_seconds)  # stands in for a forward/backward pass
    loss *= 0.98
    headway.report(step, total_steps=total, loss=loss)
    if headway.should_checkpoint():
        save(step, loss)
        print(f"checkpointed at step {step}; leaving for the preemption", flush=True)
        headway.flush()
        sys.exit(0)

headway.flush()
print(f"done: {total} steps, loss {loss:.4f}", flush=True)
