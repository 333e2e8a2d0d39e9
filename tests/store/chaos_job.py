# A job of the chaos run (chaos_test.cc): reports STEPS steps of a loss one
# way, and keeps a ledger of what it sent beside the server's, so the run can
# tell what was lost or stored twice.
#
#   chaos_job.py WAY LEDGER STEPS
#
# WAY is how it reports:
#   stdout    HEADWAY markers; each step is written to LEDGER.sent once its
#             marker line is flushed to the job's log
#   http      POST /api/v1/jobs/NAME/progress, retried until acknowledged;
#             each acknowledged step is written to LEDGER.acked
#   kubeflow  Kubeflow's TrainJob status endpoint, as Kubeflow's clients do;
#             each acknowledged step is written to LEDGER.acked
#   sdk       headway.report(), then headway.flush(); every step is written to
#             LEDGER.sent, and LEDGER.flushed says whether flush() succeeded
# Each start appends a line to LEDGER.starts. STEPS 0: report until stopped.
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request

way, ledger, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(ledger + ".starts", "a") as f:
    f.write("start\n")


def note(suffix, step):
    with open(ledger + suffix, "a") as f:
        f.write("%d\n" % step)


def post_until_acknowledged(url, body, headers, context=None):
    # A server killed mid-request, or one not leading yet, answers nothing
    # or 5xx: the report is sent again, as a client of a fleet would.
    deadline = time.monotonic() + 120
    while True:
        request = urllib.request.Request(url, json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as response:
                response.read()
                return
        except urllib.error.HTTPError as error:
            if error.code < 500 and error.code != 429:
                raise
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit("no server acknowledged step %s" % body)
        time.sleep(0.2)


def loss(step):
    return 1.0 / step


step = 0
while steps == 0 or step < steps:
    step += 1
    if way == "stdout":
        print("HEADWAY " + json.dumps({"step": step, "total_steps": steps or None,
                                       "metrics": {"loss": loss(step)}}), flush=True)
        note(".sent", step)
    elif way == "http":
        post_until_acknowledged(
            os.environ["HEADWAY_URL"] + "/api/v1/jobs/" + os.environ["HEADWAY_JOB"] + "/progress",
            {"step": step, "total_steps": steps, "metrics": {"loss": loss(step)}},
            {"Authorization": "Bearer " + os.environ["HEADWAY_TOKEN"],
             "Content-Type": "application/json"})
        note(".acked", step)
    elif way == "kubeflow":
        token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
        ca = os.environ.get("KUBEFLOW_TRAINER_SERVER_CA_CERT")
        post_until_acknowledged(
            os.environ["KUBEFLOW_TRAINER_SERVER_URL"],
            {"trainerStatus": {
                "progressPercentage": int(100 * step / steps),
                "metrics": [{"name": "current_step", "value": str(step)},
                            {"name": "total_steps", "value": str(steps)},
                            {"name": "loss", "value": "%.6f" % loss(step)}],
                "lastUpdatedTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}},
            {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
            ssl.create_default_context(cafile=ca) if ca else None)
        note(".acked", step)
    elif way == "sdk":
        import headway
        headway.report(step, total_steps=steps, loss=loss(step))
        note(".sent", step)
    else:
        raise SystemExit("unknown way " + way)
    time.sleep(0.05)

if way == "sdk":
    import headway
    with open(ledger + ".flushed", "w") as f:
        f.write("yes\n" if headway.flush(timeout=120) else "no\n")
