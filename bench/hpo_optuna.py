#!/usr/bin/env python3
"""Optuna baseline for bench/hpo_bench.cc.

Runs Optuna's TPESampler(seed=s) (default settings) and RandomSampler(seed=s)
on the same test functions as hpo_bench.cc, `--seeds` seeds x `--trials`
trials each, and prints one JSON object to stdout:

  {"tpe": {"branin": [best_per_seed, ...], ...}, "random": {...},
   "trials": T, "seeds": N, "optuna_version": "...", "seconds": {...}}

All objectives are minimised; every parameter is a plain (non-log) float, as
in hpo_bench.cc. Run with Debian's interpreter: /usr/bin/python3.
"""

import argparse
import json
import math
import sys
import time

import optuna


def branin(x):
    x1, x2 = x
    a, b, c = 1.0, 5.1 / (4 * math.pi ** 2), 5.0 / math.pi
    r, s, t = 6.0, 10.0, 1.0 / (8 * math.pi)
    return a * (x2 - b * x1 ** 2 + c * x1 - r) ** 2 + s * (1 - t) * math.cos(x1) + s


_H6_ALPHA = [1.0, 1.2, 3.0, 3.2]
_H6_A = [
    [10, 3, 17, 3.5, 1.7, 8],
    [0.05, 10, 17, 0.1, 8, 14],
    [3, 3.5, 1.7, 10, 17, 8],
    [17, 8, 0.05, 10, 0.1, 14],
]
_H6_P = [
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
]


def hartmann6(x):
    total = 0.0
    for i in range(4):
        inner = sum(_H6_A[i][j] * (x[j] - 1e-4 * _H6_P[i][j]) ** 2 for j in range(6))
        total += _H6_ALPHA[i] * math.exp(-inner)
    return -total


def rosenbrock(x):
    return sum(100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1))


def ackley(x):
    d = len(x)
    s1 = sum(v * v for v in x) / d
    s2 = sum(math.cos(2 * math.pi * v) for v in x) / d
    return -20.0 * math.exp(-0.2 * math.sqrt(s1)) - math.exp(s2) + 20.0 + math.e


# name -> (function, [(lo, hi)] per dimension). Must match hpo_bench.cc.
FUNCTIONS = {
    "branin": (branin, [(-5.0, 10.0), (0.0, 15.0)]),
    "hartmann6": (hartmann6, [(0.0, 1.0)] * 6),
    "rosenbrock4": (rosenbrock, [(-5.0, 10.0)] * 4),
    "ackley5": (ackley, [(-32.768, 32.768)] * 5),
}


def run_one(sampler, fn, bounds, trials):
    def objective(trial):
        x = [trial.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)]
        return fn(x)

    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.optimize(objective, n_trials=trials)
    return study.best_value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--functions", default=",".join(FUNCTIONS),
                        help="comma-separated subset of " + ",".join(FUNCTIONS))
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    names = [n for n in args.functions.split(",") if n]
    for n in names:
        if n not in FUNCTIONS:
            sys.exit(f"unknown function {n!r}; known: {', '.join(FUNCTIONS)}")

    samplers = {
        "tpe": lambda seed: optuna.samplers.TPESampler(seed=seed),
        "tpe-multivariate": lambda seed: optuna.samplers.TPESampler(seed=seed, multivariate=True),
        "random": lambda seed: optuna.samplers.RandomSampler(seed=seed),
    }
    out = {"trials": args.trials, "seeds": args.seeds, "optuna_version": optuna.__version__,
           "seconds": {}}
    for sampler_name, make in samplers.items():
        out[sampler_name] = {}
        start = time.perf_counter()
        for fn_name in names:
            fn, bounds = FUNCTIONS[fn_name]
            out[sampler_name][fn_name] = [
                run_one(make(seed), fn, bounds, args.trials) for seed in range(args.seeds)
            ]
        out["seconds"][sampler_name] = time.perf_counter() - start
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
