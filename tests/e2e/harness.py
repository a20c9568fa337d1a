"""The shared part of the end-to-end tests (tests/e2e/test_*.py, stdlib + numpy only).

tests/CMakeLists.txt runs every test as `python3 tests/e2e/test_X.py path/to/kvrank` from the
repository root; the script's folder is on sys.path, so `import harness` works. This module holds
what they all need: the binary under test, the repository's paths, running kvrank, the scripts and
the test writers,
the tolerance of float comparisons, the fixtures, a test case with its own temporary folder, and
skips that ctest reports as skips.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(ROOT, "scripts")
WRITERS = os.path.join(ROOT, "tests", "writers")  # independent numpy writers of test inputs
REFERENCE = os.path.join(SCRIPTS, "reference.py")  # the independent naive numpy metric
PYTHON = sys.executable
TINY = os.path.join(ROOT, "data", "tiny")  # real trained checkpoints in the repo (data/README.md)
SHARED_FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures")  # absent in a fresh clone
SKIP = 77  # the SKIP_RETURN_CODE of every e2e test (tests/CMakeLists.txt)
REL, ABS = 1e-5, 1e-6  # kvrank (float32 Grams, float64 eigensolver) vs the float64 reference

for folder in (SCRIPTS, WRITERS):
    if folder not in sys.path:
        sys.path.append(folder)  # so tests can import reference, write_family_checkpoints, ...

KVRANK = None  # the binary under test, set by kvrank_from_argv()


def kvrank_from_argv():
    """Takes the kvrank binary from sys.argv[1] (removing it, so unittest sees its own flags)."""
    global KVRANK
    if len(sys.argv) < 2:
        sys.exit(f"usage: {os.path.basename(sys.argv[0])} path/to/kvrank")
    KVRANK = os.path.abspath(sys.argv.pop(1))
    return KVRANK


def run(*args, timeout=300, text=True, **options):
    """Runs kvrank with `args` (bytes passed as they are, anything else turned into a string);
    stdout and stderr captured, as str or with text=False as bytes. `options` go to
    subprocess.run (cwd, env, stdout, preexec_fn...)."""
    options.setdefault("stdout", subprocess.PIPE)
    options.setdefault("stderr", subprocess.PIPE)
    command = [KVRANK, *(arg if isinstance(arg, bytes) else str(arg) for arg in args)]
    return subprocess.run(command, text=text, timeout=timeout, **options)


def analyze_json(*args):
    """`kvrank analyze ARGS --format json` as a parsed document; an AssertionError if it fails."""
    proc = run("analyze", *args, "--format", "json")
    if proc.returncode != 0:
        raise AssertionError(f"kvrank analyze {' '.join(map(str, args))} exited "
                             f"{proc.returncode}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def run_script(name, *args, check=True, folder=SCRIPTS):
    """Runs scripts/<name> (or `folder`/<name>) with this Python (the one with numpy)."""
    return subprocess.run([PYTHON, os.path.join(folder, name), *map(str, args)],
                          capture_output=True, text=True, check=check)


def run_writer(name, *args, check=True):
    """Runs the test writer tests/writers/<name> with this Python."""
    return run_script(name, *args, check=check, folder=WRITERS)


def close(a, b, rel=REL, abs_tol=ABS):
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_tol)


def assert_both_references(assert_layers, model, ref_dir, from_checkpoint, where):
    """kvrank's layers of one result model against both references: the writer's own per-head
    factors (reference.py heads on REF_DIR/<repr>.npz) and the reference reading the checkpoint
    itself (`from_checkpoint(repr)`, e.g. reference.cmd_llama). `assert_layers(got, want, where)`
    is the test's comparison."""
    import reference  # scripts/reference.py, on sys.path above
    repr_name = model["repr"]
    assert_layers(model["layers"], reference.cmd_heads(os.path.join(ref_dir, repr_name + ".npz")),
                  where + " (writer factors)")
    assert_layers(model["layers"], from_checkpoint(repr_name),
                  where + " (reference reads the checkpoint)")


def assert_models_match_references(test, models, ref_dir, from_checkpoint, what, **geometry):
    """The result models of one checkpoint (one per representation): each one's geometry fields as
    given (`family="llama", heads=8`, …) and its layers against both references
    (assert_both_references, compared by `test.assert_layers`)."""
    for model in models:
        where = f"{what} {model['repr']}"
        test.assertEqual({key: model[key] for key in geometry}, geometry, where)
        assert_both_references(test.assert_layers, model, ref_dir, from_checkpoint, where)


def shared_fixture(name):
    """../shared/fixtures/<name>, or None where it is absent."""
    path = os.path.join(SHARED_FIXTURES, name)
    return path if os.path.isdir(path) else None


def built_with_asan(binary):
    """AddressSanitizer reserves terabytes of address space for its shadow memory, so an address
    space limit (RLIMIT_AS) cannot apply to a binary built with it."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def built_with_openmp(binary):
    """Whether `binary` links an OpenMP runtime: without one (the sanitizer build) every layer runs
    on the calling thread, whatever --threads says."""
    listing = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return any(name in listing for name in ("libgomp", "libomp", "libiomp"))


def plant_decoy_libraries(binary, folder):
    """Writes a file that is not a library into `folder` under the name of each shared library
    `binary` loads (as ldd lists them), and returns the names: a binary whose run-time search path
    reaches the current folder fails to start there ("file too short") — or loads what it finds."""
    listing = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    names = [line.split("=>")[0].strip() for line in listing.splitlines() if "=>" in line]
    for name in names:
        with open(os.path.join(folder, name), "w") as decoy:
            decoy.write("not a library\n")
    return names


def skip(reason):
    """Ends the test as skipped: ctest shows it as "Not Run (Skipped)", never as passed."""
    print(f"{os.path.basename(sys.argv[0])}: skipped: {reason}")
    sys.exit(SKIP)


def main_unittest(module=None):
    """The main of a unittest-based test: kvrank from argv (also set as `module.KVRANK` for tests
    that keep their own), then exit 0 only if all passed."""
    binary = kvrank_from_argv()
    if module is not None:
        module.KVRANK = binary
    program = unittest.main(exit=False, verbosity=1)
    sys.exit(0 if program.result.wasSuccessful() else 1)


class TestCase(unittest.TestCase):
    """A unittest case with a fresh temporary folder for each test: self.dir, and self.path(name)
    inside it; the folder is removed after the test."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def result_document(self, layers):
        """A valid result document of data/tiny/mha (its `layers`, e.g. "0-1"), parsed: what
        `analyze -o FILE.json` writes, for a test that edits it into what kvrank must refuse.
        The file stays as self.path("good.json")."""
        path = self.path("good.json")
        done = run("analyze", os.path.join(TINY, "mha"), "--layers", layers, "-q", "-o", path)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(path) as handle:
            return json.load(handle)


class Failures(list):
    """Collects failures of a script-style test; finish() prints them and sets the exit code."""

    def finish(self, name, success_message):
        if self:
            print(f"{len(self)} failure(s):")
            for failure in self:
                print("  " + failure)
            sys.exit(1)
        print(f"{name}: {success_message}")
