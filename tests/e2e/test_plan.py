"""End-to-end tests of `kvrank plan` (docs/plan.md) against scripts/plan_reference.py.

Usage: python3 tests/e2e/test_plan.py path/to/kvrank   (run from the repository root)
The reference builds every matrix explicitly and enumerates every partition by brute force: the
plan must be its optimum and every error must match, on the trained data/tiny/mha and on random
GQA checkpoints with other RoPE layouts. The written checkpoint must read as GQA and, in a plain
PyTorch GQA model (train_tiny.py's), give the loss of the converted model (skipped without torch).
"""
import csv
import io
import json
import os
import struct
import subprocess

import numpy as np

import harness

MHA = os.path.join("data", "tiny", "mha")
MLA = os.path.join("data", "tiny", "mla")
REL = 1e-4  # float32 Grams against the float64 reference


def write_checkpoint(folder, config, tensors):
    """float32 safetensors + config.json (numpy only)."""
    os.makedirs(folder, exist_ok=True)
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)


def random_llama(folder, heads, kv_heads, head_dim, seed, **config_extra):
    rng = np.random.default_rng(seed)
    d = 24
    t = {}
    for i in range(2):
        base = f"model.layers.{i}.self_attn."
        t[base + "q_proj.weight"] = rng.standard_normal((heads * head_dim, d))
        t[base + "k_proj.weight"] = rng.standard_normal((kv_heads * head_dim, d))
        t[base + "v_proj.weight"] = rng.standard_normal((kv_heads * head_dim, d))
        t[base + "o_proj.weight"] = rng.standard_normal((d, heads * head_dim))
    config = {"model_type": "llama", "hidden_size": d, "num_hidden_layers": 2,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim}
    config.update(config_extra)
    write_checkpoint(folder, config, t)
    return folder


def without(folder, *projections):
    """The checkpoint at `folder` rewritten without the named projections (e.g. K/V only)."""
    import reference
    tensors = reference.read_safetensors(os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    kept = {n: t for n, t in tensors.items() if not any(p in n for p in projections)}
    write_checkpoint(folder, config, kept)
    return folder


class PlanTest(harness.TestCase):
    def plan(self, *args):
        proc = harness.run("plan", *args, "--format", "json", "-q")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)["models"][0]

    def reference(self, *args):
        proc = harness.run_script("plan_reference.py", *args)
        return json.loads(proc.stdout)["layers"]

    def assert_close(self, got, want, where):
        self.assertTrue(harness.close(got, want, rel=REL, abs_tol=1e-7), f"{where}: {got} != {want}")

    def assert_score(self, got, want, where):
        self.assertEqual(got["groups"], sorted(sorted(g) for g in want["groups"]), where)
        for key in ("key_error", "value_error", "qk_error", "erank_qk_after", "erank_k_after"):
            self.assert_close(got[key], want[key], f"{where} {key}")

    def check_against_reference(self, path, kv_heads, *extra, objective="merge"):
        """The plan of `extra` against the reference's: the refit unless --no-refit or --gauge
        none (the default conversion; the reference takes --refit explicitly)."""
        model = self.plan(path, "--kv-heads", kv_heads, "--objective", objective, *extra)
        plain = "--no-refit" in extra or any(a == "--gauge" and b == "none"
                                             for a, b in zip(extra, extra[1:]))
        refit = not plain
        self.assertEqual(model["refit"], refit)
        ref_args = [a for a in extra if a not in ("--latent-energy", "--no-refit", "--refit")
                    and not a.startswith("0.")] + (["--refit"] if refit else [])
        want_layers = self.reference(path, "--kv-heads", kv_heads, *ref_args,
                                     *(["--latent-energy", "0.9"] if "--latent-energy" in extra else []))
        for got, want in zip(model["layers"], want_layers, strict=True):
            where = f"{path} G={kv_heads} {objective} layer {got['layer']}"
            self.assertTrue(got["exact"], where)
            self.assert_score(got, want[objective], where)  # the brute-force optimum
            self.assert_score(got["contiguous"], want["contiguous"], where + " contiguous")
            self.assert_close(got["erank_qk_before"], want["erank_qk_before"], where + " before")
            crit = "qk_error" if objective == "qk" else None
            value = (lambda s: s[crit]) if crit else (lambda s: s["key_error"] + s["value_error"])
            if crit and refit:  # the objective is the refit's qk_error
                value = lambda s: s["refit_qk"] if "refit_qk" in s else s[crit]  # noqa: E731
            all_values = sorted(value(s) for s in want["all"])
            self.assertLessEqual(all_values[0], value(got["random_median"]) + 1e-9, where)
            self.assertLessEqual(value(got["random_median"]), all_values[-1] + 1e-9, where)
            if "--latent-energy" in extra:
                self.assertEqual(got["latent_rank"], want["latent_rank"], where)
                self.assertEqual(got["latent_rank_forms"], want["latent_rank_forms"], where)
        return model

    def test_tiny_mha_pairs_and_halvings(self):
        """The aligned mean-pool (--no-refit), and --gauge none's plain mean-pool (no refit by
        default there)."""
        model = self.check_against_reference(MHA, 4, "--latent-energy", "0.9", "--no-refit")
        self.assertEqual((model["heads"], model["kv_heads"], model["kv_heads_after"]), (8, 8, 4))
        self.assertEqual(model["gauge"], {"keys": "rope_planes(rotate_half)", "values": "orthogonal"})
        self.check_against_reference(MHA, 2, "--layers", "3", "--no-refit")
        self.check_against_reference(MHA, 4, "--layers", "2", "--no-refit", objective="qk")
        model = self.check_against_reference(MHA, 4, "--layers", "1", "--gauge", "none")
        self.assertEqual(model["gauge"], {"keys": "none", "values": "none"})

    def test_refit_is_the_default(self):
        """No flag gives --refit's document (and the reference's refit numbers, with the latent
        ranks); --no-refit the aligned mean-pool's, which differs."""
        model = self.check_against_reference(MHA, 2, "--layers", "0,3", "--latent-energy", "0.9",
                                             objective="qk")
        args = (MHA, "--kv-heads", "2", "--layers", "0,3", "--latent-energy", "0.9")
        self.assertEqual(model, self.plan(*args, "--refit"))
        plain = self.plan(*args, "--no-refit")
        self.assertFalse(plain["refit"])
        self.assertNotEqual(model["layers"], plain["layers"])
        proc = harness.run("plan", *args, "--refit", "--no-refit")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        table = harness.run("plan", *args, "-q").stdout.splitlines()[0]
        self.assertIn("objective qk with refit,", table)
        table = harness.run("plan", *args, "-q", "--no-refit").stdout.splitlines()[0]
        self.assertIn("objective qk with mean-pool,", table)

    def test_refit_matches_the_reference(self):
        """--refit: the same groups, qk_error and erank_*_after of the refit conversion (the
        reference fits it from explicit weights: complex SVDs per RoPE plane, d × d eigenproblems),
        on the tiny model, on GQA with partial rotary (the free entries' subspace fit) and without
        RoPE; the refit keeps less error than the aligned mean-pool of the same groups."""
        for objective in ("qk", "merge"):
            model = self.check_against_reference(MHA, 4, "--refit", objective=objective)
            plain = self.plan(MHA, "--kv-heads", "4", "--objective", objective, "--no-refit")
            for got, base in zip(model["layers"], plain["layers"], strict=True):
                self.assertLess(got["qk_error"], base["qk_error"])
                self.assertLess(got["contiguous"]["qk_error"], base["contiguous"]["qk_error"])
                if objective == "merge":  # the same groups and errors: only the conversion differs
                    self.assertEqual(got["groups"], base["groups"])
                    self.assertEqual((got["key_error"], got["value_error"]),
                                     (base["key_error"], base["value_error"]))
        self.check_against_reference(MHA, 2, "--refit", "--layers", "1")
        path = random_llama(self.path("partial"), 8, 4, 8, 5, partial_rotary_factor=0.5)
        self.check_against_reference(path, 2, "--refit", "--rope", "interleaved", objective="qk")
        self.check_against_reference(path, 2, "--refit", "--rope", "none", objective="qk")

    def test_refit_checkpoint_of_gqa_has_the_reported_forms(self):
        """--refit --write-checkpoint on a GQA input (two query heads per KV head, partial rotary):
        the written heads' forms Q'_pᵀ K'_g against the original Q_hᵀ K_k give the plan's qk_error."""
        import reference
        path = random_llama(self.path("gqa-in"), 8, 4, 8, seed=7, partial_rotary_factor=0.5)
        out = self.path("gqa-out")
        proc = harness.run("plan", path, "--kv-heads", "2", "--rope", "interleaved", "--refit", "-q",
                           "--format", "json", "--write-checkpoint", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        plan = json.loads(proc.stdout)["models"][0]
        before = reference.read_safetensors(os.path.join(path, "model.safetensors"))
        after = reference.read_safetensors(os.path.join(out, "model.safetensors"))
        rows = lambda w, i: w[i * 8:(i + 1) * 8]  # noqa: E731  (head_dim 8)
        for layer in plan["layers"]:
            name = f"model.layers.{layer['layer']}.self_attn."
            order = [h for group in layer["groups"] for k in group for h in (2 * k, 2 * k + 1)]
            error = total = 0.0
            for p, h in enumerate(order):
                form = rows(before[name + "q_proj.weight"], h).T @ rows(before[name + "k_proj.weight"], h // 2)
                written = rows(after[name + "q_proj.weight"], p).T @ rows(after[name + "k_proj.weight"], p // 4)
                error += float(np.sum((form - written) ** 2))
                total += float(np.sum(form ** 2))
            self.assert_close(error / total, layer["qk_error"], f"layer {layer['layer']}")

    def test_random_gqa_interleaved_partial_rotary(self):
        path = random_llama(self.path("gqa"), 8, 4, 8, seed=1, partial_rotary_factor=0.5)
        model = self.check_against_reference(path, 2, "--rope", "interleaved", "--no-refit")
        self.assertEqual(model["gauge"]["keys"], "rope_planes(interleaved, 4 of 8)")
        path = random_llama(self.path("mha6"), 6, 6, 4, seed=2, model_type="gpt2_like")
        self.check_against_reference(path, 3, "--rope", "none", "--no-refit")
        self.check_against_reference(path, 2, "--rope", "rotate_half", "--no-refit", objective="qk")

    def test_json_follows_the_schema(self):
        try:
            import jsonschema
        except ImportError:
            print("schema check skipped: python3-jsonschema is not installed")
            return
        with open(os.path.join(harness.ROOT, "docs", "schema", "kvrank-plan.schema.json")) as f:
            validator = jsonschema.Draft202012Validator(json.load(f))
        proc = harness.run("plan", MHA, "--kv-heads", "2", "--latent-energy", "0.95", "-q",
                           "--format", "json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        validator.validate(json.loads(proc.stdout))

    def test_outputs_table_and_csv(self):
        table = harness.run("plan", MHA, "--kv-heads", "4", "-q", "--layers", "0")
        self.assertEqual(table.returncode, 0, table.stderr)
        self.assertIn("exact", table.stdout)
        out = self.path("plan.csv")
        proc = harness.run("plan", MHA, "--kv-heads", "4", "-q", "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 5)
        rows = list(csv.DictReader(lines))
        self.assertEqual({row["refit"] for row in rows}, {"true"})  # the default conversion
        proc = harness.run("plan", MHA, "--kv-heads", "4", "-q", "--layers", "0", "--format", "csv",
                           "--no-refit")
        self.assertEqual(next(csv.DictReader(proc.stdout.splitlines()))["refit"], "false")
        proc = harness.run("plan", MHA, "--kv-heads", "4", "-q", "--layers", "0", "--format", "csv",
                           "--label", 'a "quoted", label')
        self.assertEqual(proc.returncode, 0, proc.stderr)
        row = next(csv.reader(io.StringIO(proc.stdout.splitlines()[1])))
        self.assertEqual(row[0], 'a "quoted", label')
        self.assertTrue(lines[0].startswith("label,layer,kv_heads,kv_heads_after,objective,refit,exact"))

    def test_bad_inputs_are_one_line_errors(self):
        unknown = random_llama(self.path("unknown"), 4, 4, 4, seed=3, model_type="zamba_like")
        kv_only = without(random_llama(self.path("kv"), 4, 4, 4, seed=4), "q_proj", "o_proj")
        no_outputs = without(random_llama(self.path("qkv"), 4, 4, 4, seed=4), "o_proj")
        cases = [
            ((MHA, "--kv-heads", "3"), "must divide the model's 8 key/value heads"),
            ((MHA, "--kv-heads", "0x4"), "expected a decimal integer"),
            ((MLA, "--kv-heads", "4"), "shared latent"),
            ((unknown, "--kv-heads", "2"), "RoPE convention"),
            ((MHA, "--kv-heads", "4", "--rope", "yarn"),
             'kvrank: error: --rope: expected none, rotate_half or interleaved, found "yarn"\n'),
            ((MHA, "--kv-heads", "4", "--latent-energy", "1.5"), "--latent-energy"),
            ((MHA, "--kv-heads", "4", "--refit", "--gauge", "none"), "--refit"),
            ((kv_only, "--kv-heads", "2"), "give --no-refit"),
            ((no_outputs, "--kv-heads", "2"), "no output projections: give --no-refit"),
        ]
        for args, message in cases:
            proc = harness.run("plan", *args)
            self.assertEqual(proc.returncode, 2, f"{args}: {proc.stderr}")
            self.assertIn(message, proc.stderr, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
            self.assertEqual(proc.stdout, "", args)

    def test_plot_draws_the_plan_figure(self):
        plan_file = self.path("plan.json")
        proc = harness.run("plan", MHA, "--kv-heads", "4", "-q", "-o", plan_file, "--random", "4")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        figure = self.path("plan.svg")
        proc = harness.run("plot", plan_file, "-o", figure, "-q")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(figure, encoding="utf-8") as f:
            svg = f.read()
        for label in ("plan", "contiguous", "random median", "before (original)", "qk_error",
                      "erank (qk)", "qk_error, 8 → 4 KV heads", "Layer"):
            self.assertIn(f">{label}<", svg, label)
        # two panels: the errors of 3 groupings, and erank before and after each of them
        self.assertEqual(svg.count('<path class="series"'), 7, svg[:2000])
        # FILE=Title, as for result files: the title heads the plan's panels
        proc = harness.run("plot", plan_file + "=Mine", "-o", figure, "-q")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(figure, encoding="utf-8") as f:
            titled = f.read()
        for label in ("Mine: qk_error, 8 → 4 KV heads", "Mine: erank_qk before and after"):
            self.assertIn(f">{label}<", titled, label)
        with open(plan_file, encoding="utf-8") as f:
            plan = json.load(f)
        del plan["models"][0]["layers"][1]["qk_error"]
        broken = self.path("broken.json")
        with open(broken, "w", encoding="utf-8") as f:
            json.dump(plan, f)
        proc = harness.run("plot", broken, "-o", self.path("broken.svg"))
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn('models[0].layers[1]: missing "qk_error"', proc.stderr)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertFalse(os.path.exists(self.path("broken.svg")))

    def test_written_checkpoint_is_gqa_with_the_predicted_loss(self):
        out = self.path("converted")
        proc = harness.run("plan", MHA, "--kv-heads", "4", "-q", "--format", "json", "--no-refit",
                           "--write-checkpoint", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        plan = json.loads(proc.stdout)["models"][0]
        analyzed = harness.analyze_json(out, "-q")["models"][0]
        self.assertEqual((analyzed["variant"], analyzed["kv_heads"]), ("gqa", 4))
        again = harness.run("plan", MHA, "--kv-heads", "4", "-q", "--write-checkpoint", out)
        self.assertEqual(again.returncode, 2, "an existing non-empty folder is refused")
        script = os.path.join(harness.ROOT, "tests", "e2e", "plan_torch_check.py")
        check = subprocess.run([harness.PYTHON, script, MHA, out, json.dumps(plan["layers"])],
                               capture_output=True, text=True, cwd=harness.ROOT)
        if check.returncode == harness.SKIP:
            print("torch check skipped:", check.stdout.strip())
            return
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

    def test_refit_checkpoint_has_the_predicted_loss(self):
        """--write-checkpoint (the default conversion, the refit): only q_proj rows, o_proj columns and the pooled K/V change
        and the stock GQA model's loss is the refit conversion's (computed by the numpy reference),
        lower than the aligned mean-pool's."""
        out = self.path("refit")
        proc = harness.run("plan", MHA, "--kv-heads", "4", "-q", "--format", "json",
                           "--write-checkpoint", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        plan = json.loads(proc.stdout)["models"][0]
        self.assertTrue(plan["refit"])
        self.assertEqual(harness.analyze_json(out, "-q")["models"][0]["kv_heads"], 4)
        table = harness.run("plan", MHA, "--kv-heads", "4", "--refit", "--layers", "0", "-q")
        self.assertIn("objective qk with refit,", table.stdout.splitlines()[0])
        script = os.path.join(harness.ROOT, "tests", "e2e", "plan_torch_check.py")
        check = subprocess.run([harness.PYTHON, script, MHA, out, json.dumps(plan["layers"]), "--refit"],
                               capture_output=True, text=True, cwd=harness.ROOT)
        if check.returncode == harness.SKIP:
            print("torch check skipped:", check.stdout.strip())
            return
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)


if __name__ == "__main__":
    harness.main_unittest()
