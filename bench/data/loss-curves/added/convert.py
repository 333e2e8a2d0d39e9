#!/usr/bin/python3
"""Convert one saved log (JSON under /tmp) into a curve CSV.

Input: a JSON file transcribed from a public training log, of the form
  {"rows": [{"s": STEP, "t": TIME, "l": LOSS, "e": EVAL_LOSS,
             "g": GRAD_NORM, "r": LEARNING_RATE}, ...]}
Every key but "s" is optional.  Values are kept exactly as written in the
source (numbers are not re-formatted); NaN / Infinity / -Infinity become
nan / inf / -inf.  Entries of the same step (e.g. a training entry and an
eval entry) are merged into one row; rows are written in step order.
time_s is the log's own time when the rows carry one, else the step.

Usage: convert.py /tmp/lc/NAME.json OUT.csv
"""
import json
import sys

COLS = [("l", "loss"), ("e", "eval_loss"), ("g", "grad_norm"), ("r", "learning_rate")]
CONST = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def main(src, dst):
    with open(src) as f:
        data = json.load(f, parse_float=str, parse_int=str,
                         parse_constant=lambda c: CONST[c])
    merged = {}
    order = []
    for row in data["rows"]:
        step = row["s"]
        if step not in merged:
            merged[step] = {}
            order.append(step)
        cur = merged[step]
        for key, value in row.items():
            if key == "s" or value is None:
                continue
            if key in cur and cur[key] != value:
                raise SystemExit(f"conflicting {key} at step {step}: {cur[key]} vs {value}")
            cur[key] = value
    order.sort(key=lambda s: float(s))
    with open(dst, "w") as out:
        out.write("step,time_s,loss,eval_loss,grad_norm,learning_rate\n")
        for step in order:
            cur = merged[step]
            cells = [step, cur.get("t", step)]
            cells += [cur.get(k, "") for k, _ in COLS]
            out.write(",".join(cells) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
