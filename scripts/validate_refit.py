#!/usr/bin/env python3
"""Validation of `kvrank plan --refit` on data/tiny/mha (docs/plan.md, "Validation", "Refit").

Adds to a result file of scripts/validate_plan.py (whose whole-model groups and windows it uses):
    python3 scripts/validate_refit.py whole --out docs/plan-validation.json   # whole-model rows
    python3 scripts/validate_refit.py sweep --out …   # and every partition of every layer alone
    python3 scripts/validate_refit.py train --steps 50,200 --out …   # further training
    python3 scripts/validate_refit.py --report docs/plan-validation.json   # the tables
Each rule's groups are converted with the maps refitted on the aligned mean-pool ("mean") and with
the form-fitted pool of `kvrank plan --refit` ("fit"), both by scripts/plan_reference.py.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan_reference as ref  # noqa: E402
from validate_plan import Evaluator, criterion_summary, gauges, refit_weights, train_further  # noqa: E402


def gqa_refit_state(tensors, layers, parts, d):
    """The --refit conversion as a stock GQA state dict (query heads reordered group by group)."""
    state = dict(tensors)
    for layer, part in zip(layers, parts):
        kg, _ = gauges(layer, True)
        kbar, vbar, qmap, omap = ref.refit_conversion(layer, part, kg)
        base = f"model.layers.{layer['layer']}.self_attn."
        q, o = tensors[base + "q_proj.weight"], tensors[base + "o_proj.weight"]
        state[base + "k_proj.weight"] = np.vstack([kbar[g[0]] for g in part])
        state[base + "v_proj.weight"] = np.vstack([vbar[g[0]] for g in part])
        state[base + "q_proj.weight"] = np.vstack([qmap[i] @ q[i * d:(i + 1) * d] for g in part for i in g])
        state[base + "o_proj.weight"] = np.hstack([o[:, i * d:(i + 1) * d] @ omap[i] for g in part for i in g])
    return state


def refit_report(r):
    """The refit's tables (docs/plan.md, "Validation", "Refit")."""
    base = r["base_loss_final"]
    print("\n| G | layer | criterion (refit loss) | Spearman ρ | pick's loss increase | percentile | best | median | contiguous |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in r["refit"].get("layers", []):
        for crit in ("merge", "qk", "refit_qk"):
            c = e[crit]
            print(f"| {e['kv_heads_after']} | {e['layer']} | {crit} | {c['spearman']:.2f} | {c['pick_loss']:+.4f} | "
                  f"{c['pick_percentile']:.0f} | {c['best_loss']:+.4f} | {c['median_loss']:+.4f} | {e['contiguous']:+.4f} |")
    for g, rows in r["refit"]["whole"].items():
        print(f"\nWhole model with the refit, G = {g} (increase over {base:.4f}; trained: loss after 50 / 200 steps):\n")
        print("| groups | aligned mean-pool | maps refitted on it | form-fitted pool + refit (--refit) | trained |")
        print("|---|---|---|---|---|")
        for name, v in rows.items():
            old = r["whole"][g].get(name, {}).get("loss")
            t = v.get("trained", {})
            cells = [f"{old - base:+.4f}" if old else "", f"{v['mean'] - base:+.4f}" if "mean" in v else
                     (f"{v['plain'] - base:+.4f} (plain mean)" if "plain" in v else ""),
                     f"{v['fit'] - base:+.4f}" if "fit" in v else "",
                     f"{t['50']:.4f} / {t['200']:.4f}" if t else ""]
            print(f"| {name} | " + " | ".join(cells) + " |")


def refit_whole(ev, layers, result):
    """Whole-model rows with the refit: each rule's groups (from the sweeps' picks) converted with
    the maps refitted on the aligned mean-pool ("mean"), and with the form-fitted pool ("fit", what
    `kvrank plan --refit` writes); the GQA paper's init with maps refitted on the plain mean."""
    out = {}
    for g, whole in result["whole"].items():
        rows = {}
        for name, entry in whole.items():
            if "groups" not in entry or name == "none_criterion_unaligned":
                continue
            pools = ("plain",) if name == "gqa_paper_init" else ("mean", "fit")
            for pool in pools:
                replaced = {l["layer"]: refit_weights(l, p, pool) for l, p in zip(layers, entry["groups"])}
                rows.setdefault(name, {})[pool] = ev.loss(replaced)
            print(f"G={g} {name}: refit {rows[name]}", flush=True)
        out[g] = rows
    return out


def refit_sweep(ev, layer, size, base):
    """Every partition of one layer with the refit conversion: its loss increase and criteria
    (qk_error of the refit conversion; merge and qk of the aligned mean-pool)."""
    kg, vg = gauges(layer, True)
    rows = []
    for part in ref.partitions(list(range(len(layer["k"]))), size):
        plain = ref.score(part, layer, kg, vg, eranks=False)
        rows.append({"groups": part, "merge": plain["key_error"] + plain["value_error"],
                     "qk": plain["qk_error"], "refit_qk": ref.refit_score(part, layer, kg, plain)["qk_error"],
                     "loss_refit": ev.loss({layer["layer"]: refit_weights(layer, part)}) - base})
    return rows


def refit_main(args):
    """Adds the refit's whole-model rows (whole), per layer its sweep (sweep), or further training
    of its conversions (train) to an existing --out."""
    import torch
    torch.set_num_threads(1)
    _, layers, d, kvh = ref.load_layers(args.model, None)
    with open(args.out) as f:
        result = json.load(f)
    final = Evaluator(args.model, result["final_windows"])
    refit = result.setdefault("refit", {})
    if args.mode == "train":  # the refit's conversions trained further, as the rows above
        steps = [int(x) for x in args.steps.split(",")]
        for g, rows in refit["whole"].items():
            for name in ("pick_refit_qk", "contiguous_aligned"):
                parts = rows[name].get("groups") or result["whole"][g][name]["groups"]
                trained = train_further(final, gqa_refit_state(final.tensors, layers, parts, d), int(g), steps)
                rows[name]["trained"] = trained
                print(f"G={g} {name} refit trained: {trained}", flush=True)
                with open(args.out, "w") as f:
                    json.dump(result, f, indent=1)
        return
    for g, rows in refit_whole(final, layers, result).items():  # kept: picks, training
        for name, losses in rows.items():
            refit.setdefault("whole", {}).setdefault(g, {}).setdefault(name, {}).update(losses)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    if args.mode != "sweep":
        return
    ev = Evaluator(args.model, result["windows"])
    refit["layers"] = []
    for g in (int(x) for x in args.groups.split(",")):
        picks = []
        for layer in layers:
            rows = refit_sweep(ev, layer, kvh // g, result["base_loss"])
            entry = {"layer": layer["layer"], "kv_heads_after": g, "rows": rows}
            for crit in ("merge", "qk", "refit_qk"):
                entry[crit] = criterion_summary(rows, crit, "loss_refit")
            entry["contiguous"] = rows[0]["loss_refit"]
            refit["layers"].append(entry)
            picks.append(rows)
            print(f"G={g} layer {layer['layer']} refit: " + ", ".join(
                f"{c} rho {entry[c]['spearman']:.2f} pick pct {entry[c]['pick_percentile']:.0f}"
                for c in ("merge", "qk", "refit_qk")), flush=True)
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        for crit in ("refit_qk", "loss_refit"):
            parts = [min(rows, key=lambda r: r[crit])["groups"] for rows in picks]
            loss = final.loss({l["layer"]: refit_weights(l, p) for l, p in zip(layers, parts)})
            refit["whole"][str(g)][f"pick_{crit}"] = {"fit": loss, "groups": parts}
            print(f"G={g} whole model, refit, groups picked by {crit}: {loss:.4f}", flush=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        with open(sys.argv[2]) as f:
            return refit_report(json.load(f))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["whole", "sweep", "train"])
    p.add_argument("--model", default="data/tiny/mha")
    p.add_argument("--groups", default="4,2", help="KV heads after, in the order run (sweep)")
    p.add_argument("--steps", default="50,200", help="training steps evaluated (train)")
    p.add_argument("--out", required=True)
    refit_main(p.parse_args())


if __name__ == "__main__":
    main()
