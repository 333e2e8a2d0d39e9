#!/usr/bin/env python3
"""A small real training job: an MLP learning a synthetic classification task
on CPU with PyTorch. Runs alone or as a multi-process DDP job (gloo backend)
when started by Headway with processes_per_node > 1.

Progress goes to Headway through the SDK when it is importable (set
PYTHONPATH to sdk/python), and as `HEADWAY {...}` lines on stdout otherwise.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

try:
    import headway  # the Headway SDK (sdk/python)
except ImportError:  # still runs, and still reports, without it
    headway = None


def report(step, total_steps, epoch, metrics):
    if headway is not None:
        headway.report(step=step, total_steps=total_steps, epoch=epoch, **metrics)
    elif int(os.environ.get("RANK", "0")) == 0:
        line = {"step": step, "total_steps": total_steps, "epoch": epoch, "metrics": metrics}
        print("HEADWAY " + json.dumps(line), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="seconds to sleep per step, to watch progress live")
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)

    # Synthetic task: 3 Gaussian blobs in 20 dimensions, the same for every rank.
    generator = torch.Generator().manual_seed(1234)
    centers = torch.randn(3, 20, generator=generator) * 2.0
    labels = torch.randint(0, 3, (6000,), generator=generator)
    features = centers[labels] + torch.randn(6000, 20, generator=generator)
    shard = slice(rank, None, world)  # each rank trains on its own shard
    features, labels = features[shard], labels[shard]

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    steps_per_epoch = max(1, len(features) // args.batch_size)

    start = time.time()
    for step in range(1, args.steps + 1):
        i = (step - 1) % steps_per_epoch
        x = features[i * args.batch_size:(i + 1) * args.batch_size]
        y = labels[i * args.batch_size:(i + 1) * args.batch_size]
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()
        if step % 10 == 0 or step == args.steps:
            elapsed = time.time() - start
            report(step, args.steps, step / steps_per_epoch, {
                "loss": loss.item(),
                "grad_norm": float(grad_norm),
                "learning_rate": args.lr,
                "samples_per_second": step * args.batch_size * world / max(elapsed, 1e-9),
            })
            if rank == 0:
                print(f"step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
        if args.step_delay:
            time.sleep(args.step_delay)

    if headway is not None:
        headway.flush(timeout=5)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
