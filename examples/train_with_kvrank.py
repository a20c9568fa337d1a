#!/usr/bin/env python3
"""Head diversity during training, without writing a checkpoint: trains one of the tiny byte-level
models of scripts/train_tiny.py with PyTorch and, every N steps, measures each layer's effective
rank of the model in memory (kvrank.Tracker, which calls kvrank.analyze_state_dict) from a
training callback.

  PYTHONPATH=build/python python3 examples/train_with_kvrank.py --steps 300 --every 50 --out run/
  build/kvrank plot run/trajectory.json --over-steps layers -o run/steps.svg

Writes OUT/trajectory.json — one model per logged step, labelled "RUN step N" and carrying its
run and training step, in the result format of `kvrank analyze --format json` (so `kvrank plot`,
also `--over-steps`, and `kvrank check` read it) — and OUT/trajectory.svg, each layer's metric
against the training step, in a panel named after the run (--run; default the variant). Needs
PyTorch and the kvrank module (docs/python.md). Runs on one CPU thread by default (--threads).
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import kvrank  # noqa: E402
import train_tiny  # noqa: E402  (the model, its config and the corpus)


def log_measurement(tracker, step, model, last=False):
    """The training callback: kvrank.Tracker measures every `every` steps (and the last one);
    the model's tensors are read where they lie, nothing is saved."""
    result = tracker.measure(model, step, force=last)
    if result is not None:
        layers = result.to_dict()["models"][0]["layers"]
        print(f"step {step:5d}  erank per layer: "
              + " ".join(f"{layer['erank']:.2f}" for layer in layers), flush=True)


def train(args, callback):
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data, _ = train_tiny.load_corpus(Path(args.corpus))
    train_bytes, _ = train_tiny.split_corpus(data)
    tokens = torch.tensor(list(train_bytes[:args.corpus_bytes]), dtype=torch.long)
    model = train_tiny.build_model(args.variant, args.context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95))
    batches = torch.Generator().manual_seed(args.seed)
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = train_tiny.lr_at(step, args.steps, args.lr, warmup=min(50, args.steps))
        callback(step, model)
        offsets = torch.randint(0, len(tokens) - args.context - 1, (args.batch,),
                                generator=batches).tolist()
        x = torch.stack([tokens[o:o + args.context] for o in offsets])
        y = torch.stack([tokens[o + 1:o + args.context + 1] for o in offsets])
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, train_tiny.VOCAB),
                                                 y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    callback(args.steps, model, last=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="gqa", choices=sorted(train_tiny.VARIANTS))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=50, help="log every N steps")
    parser.add_argument("--repr", default="qk")
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--corpus", default=f"/usr/lib/python3.{sys.version_info.minor}")
    parser.add_argument("--corpus-bytes", type=int, default=4 << 20)
    parser.add_argument("--out", default="trajectory")
    parser.add_argument("--run", help="the run's name in the results and figures (default: the "
                        "variant)")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tracker = kvrank.Tracker(train_tiny.make_config(args.variant, args.context),
                             run=args.run or args.variant, every=args.every, repr=args.repr)
    started = time.time()
    train(args, lambda *measured, **last: log_measurement(tracker, *measured, **last))
    tracker.results.save(out / "trajectory.json")
    # From the file, as `kvrank plot trajectory.json --over-steps layers` draws it.
    kvrank.plot(out / "trajectory.json", out / "trajectory.svg", over_steps="layers",
                title=f"{args.variant}: erank during training")
    print(f"{len(tracker.steps)} measurements in {time.time() - started:.0f}s: "
          f"{out / 'trajectory.json'}, {out / 'trajectory.svg'}")


if __name__ == "__main__":
    main()
