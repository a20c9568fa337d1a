#!/usr/bin/env python3
"""End-to-end: what `kvrank analyze` / `inspect` take as models, and the labels they get.

- a file inside a Hugging Face folder is labelled after the folder; equal default labels become
  NAME-2, NAME-3 with a note on stderr, so `plot` draws them apart and `check` accepts the file;
  a --label given twice is a usage error;
- a Hugging Face repo id (ORG/NAME, ORG/NAME@REV) is read from a fake hub cache built here the way
  huggingface_hub lays it out (refs/main, snapshots/<commit>/ of symlinks into blobs/), chosen by
  $HF_HUB_CACHE or $HF_HOME, and gives the same numbers as the folder it was made from; a model
  that is not cached is an exit-2 error naming the paths tried; nothing is downloaded.

Run from the repository root: python3 tests/e2e/test_model_inputs.py path/to/kvrank
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "writers"))
import write_family_checkpoints as writer  # noqa: E402

import harness  # noqa: E402  (tests/e2e is on sys.path)

KVRANK = None  # set in main
COMMIT = "0123456789abcdef0123456789abcdef01234567"
OLD_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def run(args, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")}
    full_env.update(env or {})
    return subprocess.run([KVRANK] + args, capture_output=True, text=True, env=full_env, cwd=cwd,
                          timeout=120)


def write_model(folder, family="llama", seed=0):
    writer.write_family(family, folder, folder + ".ref", seed=seed, layers=2, heads=4, d_model=32)
    shutil.rmtree(folder + ".ref")


def cache_model(hub, repo, source, commit=COMMIT, main=True):
    """Puts `source`'s files into hub/models--ORG--NAME as huggingface_hub does: blobs named by
    content, snapshots/<commit>/ of relative symlinks to them, refs/main holding the commit."""
    model = os.path.join(hub, "models--" + repo.replace("/", "--"))
    snapshot = os.path.join(model, "snapshots", commit)
    os.makedirs(os.path.join(model, "blobs"), exist_ok=True)
    os.makedirs(snapshot)
    for name in os.listdir(source):
        blob = f"{commit[:8]}-{name}.blob"
        shutil.copy(os.path.join(source, name), os.path.join(model, "blobs", blob))
        os.symlink(os.path.join("..", "..", "blobs", blob), os.path.join(snapshot, name))
    if main:
        os.makedirs(os.path.join(model, "refs"), exist_ok=True)
        with open(os.path.join(model, "refs", "main"), "w") as f:
            f.write(commit)
    return snapshot


class Labels(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = cls.tmp.name
        for name, seed in (("runs/qwen-a", 1), ("runs/qwen-b", 2), ("x/mha", 3), ("y/mha", 4)):
            write_model(os.path.join(cls.root, name), seed=seed)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def analyze(self, *args):
        result = run(["analyze", *args, "--format", "json"])
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout), result.stderr

    def test_file_in_hf_folder_is_labelled_after_the_folder(self):
        doc, stderr = self.analyze(self.path("runs/qwen-a/model.safetensors"),
                                   self.path("runs/qwen-b/model.safetensors"))
        self.assertEqual([m["label"] for m in doc["models"]], ["qwen-a", "qwen-b"])
        self.assertNotIn("labelled", stderr)

    def test_equal_default_labels_are_numbered_and_plot_and_check_accept_them(self):
        doc, stderr = self.analyze(self.path("x/mha"), self.path("y/mha"), self.path("x/mha"))
        self.assertEqual([m["label"] for m in doc["models"]], ["mha", "mha-2", "mha-3"])
        self.assertIn(f'{self.path("y/mha")} is labelled "mha-2": "mha" is taken by an earlier '
                      'model (choose with --label)', stderr)
        self.assertNotEqual(doc["models"][0]["layers"][0]["erank"],
                            doc["models"][1]["layers"][0]["erank"])
        results = self.path("both.json")
        with open(results, "w") as f:
            json.dump(doc, f)
        check = run(["check", results, "--baseline", results])
        self.assertEqual(check.returncode, 0, check.stderr)
        svg = self.path("both.svg")
        plot = run(["plot", results, "-o", svg])
        self.assertEqual(plot.returncode, 0, plot.stderr)
        with open(svg) as f:
            figure = f.read()
        for label in ("mha", "mha-2", "mha-3"):  # three legend entries, three colours
            self.assertEqual(figure.count(f'<g class="legend-entry" data-label="{label}">'), 1, label)

    def test_given_labels_are_kept_and_reserved(self):
        doc, stderr = self.analyze(self.path("x/mha"), self.path("y/mha"), "--label", "mha-2")
        self.assertEqual([m["label"] for m in doc["models"]], ["mha-2", "mha"])
        self.assertNotIn("labelled", stderr)

    def test_a_label_given_twice_is_refused(self):
        result = run(["analyze", self.path("x/mha"), self.path("y/mha"), "--label", "run",
                      "--label", "run"])
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, "")
        self.assertEqual(result.stderr.strip(), 'kvrank: error: --label "run" is given twice '
                                                '(models are told apart by their labels)')


class HubCache(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = cls.tmp.name
        cls.source = os.path.join(root, "written", "qwen3")
        cls.older = os.path.join(root, "written", "older")
        write_model(cls.source, family="qwen3", seed=11)
        write_model(cls.older, family="qwen3", seed=12)
        cls.hub = os.path.join(root, "hub")
        cls.snapshot = cache_model(cls.hub, "Qwen/Qwen3-tiny", cls.source)
        cache_model(cls.hub, "Qwen/Qwen3-tiny", cls.older, commit=OLD_COMMIT, main=False)
        cls.env = {"HF_HUB_CACHE": cls.hub}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def analyze(self, args, env):
        result = run(["analyze", *args, "--format", "json"], env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)["models"]

    def test_repo_id_reads_the_cached_snapshot_through_its_symlinks(self):
        self.assertTrue(os.path.islink(os.path.join(self.snapshot, "model.safetensors")))
        [cached] = self.analyze(["Qwen/Qwen3-tiny"], self.env)
        [direct] = self.analyze([self.source], {})
        self.assertEqual(cached["label"], "Qwen3-tiny")
        self.assertEqual(cached["path"], self.snapshot)
        self.assertEqual(cached["family"], "llama")
        self.assertEqual([l["erank"] for l in cached["layers"]], [l["erank"] for l in direct["layers"]])

    def test_hf_home_and_a_pinned_revision(self):
        home = os.path.join(self.tmp.name, "home")
        os.makedirs(home, exist_ok=True)
        if not os.path.exists(os.path.join(home, "hub")):
            os.symlink(self.hub, os.path.join(home, "hub"))
        latest, pinned = self.analyze(["Qwen/Qwen3-tiny", "Qwen/Qwen3-tiny@" + OLD_COMMIT],
                                      {"HF_HOME": home})
        [older] = self.analyze([self.older], {})
        self.assertEqual(latest["label"], "Qwen3-tiny")
        self.assertEqual(pinned["label"], "Qwen3-tiny@" + OLD_COMMIT)
        self.assertEqual([l["erank"] for l in pinned["layers"]], [l["erank"] for l in older["layers"]])
        self.assertNotEqual(latest["layers"][0]["erank"], pinned["layers"][0]["erank"])

    def test_inspect_takes_repo_ids_too(self):
        result = run(["inspect", "Qwen/Qwen3-tiny", "--format", "json"], env=self.env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("q_norm", result.stdout)

    def test_a_model_not_in_the_cache_names_the_paths_tried(self):
        result = run(["analyze", "Qwen/Qwen3-8B", "--format", "json"], env=self.env)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stdout, "")
        folder = os.path.join(self.hub, "models--Qwen--Qwen3-8B")
        self.assertEqual(result.stderr.strip(),
                         f"kvrank: error: Qwen/Qwen3-8B: no such file or folder, and not in the "
                         f"local Hugging Face cache: no folder {folder} (the Hugging Face cache, from $HF_HUB_CACHE); kvrank "
                         f"reads the local cache only and never downloads: fetch it first "
                         f'(hf download Qwen/Qwen3-8B --include "*.safetensors" "*.json") or give a path')
        result = run(["analyze", "Qwen/Qwen3-tiny@v9"], env=self.env)
        self.assertEqual(result.returncode, 2)
        self.assertIn('the cache has no revision "v9"', result.stderr)
        self.assertIn(f"snapshots present: {COMMIT}, {OLD_COMMIT}", result.stderr)

    def test_home_cache_is_the_default(self):
        home = os.path.join(self.tmp.name, "user")
        os.makedirs(os.path.join(home, ".cache", "huggingface"), exist_ok=True)
        link = os.path.join(home, ".cache", "huggingface", "hub")
        if not os.path.exists(link):
            os.symlink(self.hub, link)
        [model] = self.analyze(["Qwen/Qwen3-tiny"], {"HOME": home})
        self.assertEqual(model["label"], "Qwen3-tiny")

    def test_an_existing_path_wins_over_the_cache(self):
        cwd = os.path.join(self.tmp.name, "work")
        os.makedirs(os.path.join(cwd, "Qwen"), exist_ok=True)
        local = os.path.join(cwd, "Qwen", "Qwen3-tiny")
        if not os.path.exists(local):
            shutil.copytree(self.older, local)
        result = run(["analyze", "Qwen/Qwen3-tiny", "--format", "json"], env=self.env, cwd=cwd)
        self.assertEqual(result.returncode, 0, result.stderr)
        [model] = json.loads(result.stdout)["models"]
        self.assertEqual(model["path"], "Qwen/Qwen3-tiny")


if __name__ == "__main__":
    harness.main_unittest(sys.modules[__name__])
