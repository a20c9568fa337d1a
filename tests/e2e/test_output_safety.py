"""Regression tests of the outputs: every way an output, a figure, a stream or a message could go
wrong, one numbered test class per class of failure.

Usage: python3 tests/e2e/test_output_safety.py path/to/kvrank   (run from the repository root)
Every run is bounded in time (subprocess timeout) and memory (RLIMIT_AS); a failure must be exit 2
with one line `kvrank: error: <file>...` on stderr and nothing on stdout. Result files are written
here by hand (docs/result-format.md), checkpoints by `kvrank synth` or tests/writers/write_test_files.py (numpy).
Special files are FIFOs and symlinks made in a temporary folder; no real /dev node is ever a target.
"""
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import unittest
import xml.etree.ElementTree as ET

import numpy as np

import harness  # puts scripts/ on sys.path
from write_test_files import safetensors_bytes  # the independent numpy writer

NS = "{http://www.w3.org/2000/svg}"
MEMORY_LIMIT = 2 << 30  # bounded memory: ≤ 2 GB for any input under 10 MB
TIMEOUT = 60
# The body of a fake rsvg-convert: reads the SVG on stdin, writes "png" on stdout.
WRITE_PNG = "cat > /dev/null; printf png"


# The sanitized build runs these tests without RLIMIT_AS (harness.built_with_asan); the release
# build of the same suite keeps the bound.
BOUND_ADDRESS_SPACE = True  # setUpModule: False for a binary built with AddressSanitizer


def setUpModule():
    global BOUND_ADDRESS_SPACE
    BOUND_ADDRESS_SPACE = not harness.built_with_asan(harness.KVRANK)


def limit_memory():
    """preexec_fn: the memory bound, and default signal dispositions (a caller's nohup or `&` would
    leave SIGHUP/SIGINT ignored, and kvrank rightly keeps an ignored signal ignored)."""
    if BOUND_ADDRESS_SPACE:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def run(*args, timeout=TIMEOUT, **options):
    """harness.run under the memory bound: bytes arguments allowed, stdout/stderr as bytes;
    `options`: cwd, env, stdout."""
    return harness.run(*args, timeout=timeout, text=False, preexec_fn=limit_memory, **options)


def layer_entry(index, heads=4, erank=2.0):
    eigen = [1.0 / heads] * heads
    return {"layer": index, "heads": heads, "erank": erank, "erank_centered": erank,
            "erank_pct": 100.0 * erank / heads, "erank_centered_pct": 100.0 * erank / heads,
            "mean_similarity": 0.25, "pcs_90": 2, "eigenvalues": eigen,
            "eigenvalues_centered": eigen, "head_erank": [1.0] * heads,
            "head_norm": [1.0] * heads, "zero_heads": []}


def result_document(label="m", layers=((0, 2.0), (1, 3.0)), metric="erank"):
    """A result file (docs/result-format.md) with one model whose `metric` takes the given (layer, value)s."""
    entries = []
    for index, value in layers:
        entry = layer_entry(index)
        entry[metric] = value
        entries.append(entry)
    return {"schema_version": 1, "tool": {"name": "kvrank", "version": "0.1.0"},
            "models": [{"label": label, "path": "/ckpt/" + label, "family": "llama",
                        "variant": "mha", "heads": 4, "kv_heads": 4, "head_dim": 8, "d_model": 32,
                        "num_layers": len(entries), "lrkv_rank": None, "mla_kv_lora_rank": None,
                        "repr": "qk", "layers": entries,
                        "summary": {"erank_mean": 2.5, "erank_centered_mean": 2.5,
                                    "erank_pct_mean": 62.5, "erank_centered_pct_mean": 62.5}}]}


def write_json(path, document):
    with open(path, "w") as handle:
        json.dump(document, handle)
    return path


def synth(path, *extra):
    result = run("synth", "--family", "llama", "--layers", "2", "--heads", "4", "--kv-heads", "4",
                 "--head-dim", "8", "--seed", "3", *extra, "-o", path)
    assert result.returncode == 0, result.stderr
    return path


def running(pid):
    """Whether process `pid` still runs (a zombie nobody has reaped yet has ended)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def debris(folder):
    """Temporary files kvrank could leave behind (hidden `.NAME.tmp-XXXXXX`)."""
    return sorted(name for name in os.listdir(folder) if ".tmp-" in name)


class OutputTestCase(harness.TestCase):
    def assert_error(self, result, *naming):
        """Exit 2, nothing on stdout, one `kvrank: error:` line on stderr holding each of naming."""
        stderr = result.stderr.decode("utf-8", "replace")
        self.assertEqual(result.returncode, 2, stderr)
        self.assertEqual(result.stdout or b"", b"")
        lines = stderr.splitlines()
        self.assertEqual(len(lines), 1, stderr)
        self.assertTrue(lines[0].startswith("kvrank: error: "), lines[0])
        for text in naming:
            self.assertIn(text, lines[0])
        return lines[0]

    def assert_ok(self, result):
        self.assertEqual(result.returncode, 0, result.stderr.decode("utf-8", "replace"))


# -------------------------------------------------------------------------------------------------
class Class3ShellInjection(OutputTestCase):
    """`plot -o x.png` must never run a shell, nor overwrite `x.svg`."""

    def setUp(self):
        super().setUp()
        self.result = write_json(self.path("r.json"), result_document())

    def fake_converter(self, script):
        """A folder holding an `rsvg-convert` that runs `script` (sh), to put first on PATH."""
        folder = self.path("bin")
        os.mkdir(folder)
        converter = os.path.join(folder, "rsvg-convert")
        with open(converter, "w") as handle:
            handle.write("#!/bin/sh\n" + script + "\n")
        os.chmod(converter, 0o755)
        return dict(os.environ, PATH=folder + os.pathsep + os.environ.get("PATH", ""))

    @unittest.skipUnless(shutil.which("rsvg-convert"), "rsvg-convert (librsvg2-bin) not installed")
    def test_quotes_in_the_png_name_run_no_shell(self):
        name = "a';touch PWNED;'.png"
        self.assert_ok(run("plot", self.result, "-o", name, cwd=self.dir))
        self.assertFalse(os.path.exists(self.path("PWNED")))
        with open(self.path(name), "rb") as handle:
            self.assertEqual(handle.read(8), b"\x89PNG\r\n\x1a\n")
        self.assertEqual(sorted(os.listdir(self.dir)), sorted(["r.json", name]))

    def test_converter_gets_no_file_name_at_all(self):
        env = self.fake_converter('printf "%s\\n" "$@" > args.txt\n' + WRITE_PNG)
        name = "$(touch PWNED).png"
        self.assert_ok(run("plot", self.result, "-o", name, cwd=self.dir, env=env))
        self.assertFalse(os.path.exists(self.path("PWNED")))
        with open(self.path(name)) as handle:
            self.assertEqual(handle.read(), "png")
        with open(self.path("args.txt")) as handle:  # SVG on stdin, PNG on stdout
            self.assertEqual(handle.read().splitlines(),
                             ["-f", "png", "--dpi-x=300", "--dpi-y=300"])

    def test_an_existing_svg_of_the_same_name_is_left_alone(self):
        with open(self.path("fig.svg"), "w") as handle:
            handle.write("my own figure")
        env = self.fake_converter(WRITE_PNG)
        self.assert_ok(run("plot", self.result, "-o", "fig.png", cwd=self.dir, env=env))
        with open(self.path("fig.svg")) as handle:
            self.assertEqual(handle.read(), "my own figure")
        self.assertEqual(debris(self.dir), [])
        self.assertTrue(os.path.exists(self.path("fig.png")))

    def test_a_missing_converter_is_an_error_and_leaves_nothing(self):
        empty = self.path("empty-bin")
        os.mkdir(empty)
        result = run("plot", self.result, "-o", "fig.png", cwd=self.dir,
                     env=dict(os.environ, PATH=empty))
        self.assert_error(result, "fig.png", "rsvg-convert")
        self.assertEqual(sorted(os.listdir(self.dir)), ["empty-bin", "r.json"])

    def test_a_failing_converter_is_an_error_and_leaves_nothing(self):
        env = self.fake_converter("exit 1")
        self.assert_error(run("plot", self.result, "-o", "fig.png", cwd=self.dir, env=env),
                          "fig.png", "rsvg-convert")
        self.assertEqual(sorted(os.listdir(self.dir)), ["bin", "r.json"])


# -------------------------------------------------------------------------------------------------
class Class4OutputOntoSpecialFiles(OutputTestCase):
    """`-o` follows symlinks, writes through to FIFOs/devices, refuses directories and inputs."""

    def baseline_to(self, target):
        return run("baseline", "--layers", "2", "--format", "json", "-o", target)

    def assert_baseline_json(self, text):
        self.assertEqual(json.loads(text)["models"][0]["variant"], "baseline")

    def test_symlink_is_followed_and_stays_a_link(self):
        real = self.path("real.json")
        with open(real, "w") as handle:
            handle.write("old")
        os.chmod(real, 0o640)
        os.symlink("real.json", self.path("link.json"))
        self.assert_ok(self.baseline_to(self.path("link.json")))
        self.assertTrue(os.path.islink(self.path("link.json")))
        with open(real) as handle:
            self.assert_baseline_json(handle.read())
        self.assertEqual(stat.S_IMODE(os.stat(real).st_mode), 0o640)  # the file keeps its mode
        self.assertEqual(debris(self.dir), [])

    def test_dangling_symlink_creates_its_target(self):
        os.mkdir(self.path("sub"))
        os.symlink(os.path.join("sub", "new.json"), self.path("link.json"))
        self.assert_ok(self.baseline_to(self.path("link.json")))
        self.assertTrue(os.path.islink(self.path("link.json")))
        with open(self.path("sub/new.json")) as handle:
            self.assert_baseline_json(handle.read())
        self.assertEqual(debris(self.dir) + debris(self.path("sub")), [])

    def test_new_file_gets_the_umask_mode(self):
        old = os.umask(0o027)
        try:
            self.assert_ok(self.baseline_to(self.path("new.json")))
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("new.json")).st_mode), 0o640)

    def read_fifo_in_background(self, fifo):
        received = {}

        def reader():
            with open(fifo, "rb") as handle:
                received["data"] = handle.read()

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        return thread, received

    def test_fifo_is_written_through_and_stays_a_fifo(self):
        fifo = self.path("out.fifo")
        os.mkfifo(fifo)
        thread, received = self.read_fifo_in_background(fifo)
        self.assert_ok(self.baseline_to(fifo))
        thread.join(TIMEOUT)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        self.assert_baseline_json(received["data"])
        self.assertEqual(debris(self.dir), [])

    def test_symlink_to_a_fifo_is_written_through(self):  # like -o /dev/stdout
        fifo = self.path("out.fifo")
        os.mkfifo(fifo)
        os.symlink(fifo, self.path("stdout"))
        thread, received = self.read_fifo_in_background(fifo)
        self.assert_ok(self.baseline_to(self.path("stdout")))
        thread.join(TIMEOUT)
        self.assertTrue(os.path.islink(self.path("stdout")))
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        self.assert_baseline_json(received["data"])

    def test_directory_is_refused(self):
        os.mkdir(self.path("folder"))
        self.assert_error(self.baseline_to(self.path("folder")), self.path("folder"), "directory")

    def test_plot_onto_its_input_is_refused(self):
        # A result under a figure's name: an output named .json is refused for its format first.
        result_file = write_json(self.path("r.svg"), result_document())
        with open(result_file, "rb") as handle:
            before = handle.read()
        os.link(result_file, self.path("hardlink.svg"))
        os.symlink("r.svg", self.path("symlink.svg"))
        for output in ("r.svg", "hardlink.svg", "symlink.svg", "./r.svg"):
            with self.subTest(output=output):
                result = run("plot", result_file, "-o", output, cwd=self.dir)
                self.assert_error(result, output, "input")
                with open(result_file, "rb") as handle:
                    self.assertEqual(handle.read(), before)
        self.assertEqual(debris(self.dir), [])

    def test_analyze_onto_its_checkpoint_or_map_is_refused(self):
        folder = synth(self.path("ckpt"))
        weights = os.path.join(folder, "model.safetensors")
        with open(weights, "rb") as handle:
            before = handle.read()
        for args in ((weights, "-o", weights), (folder, "-o", weights),
                     (folder, "--map", weights, "-o", weights)):
            with self.subTest(args=args):
                self.assert_error(run("analyze", *args, "-q"), weights, "input")
        with open(weights, "rb") as handle:
            self.assertEqual(handle.read(), before)


# -------------------------------------------------------------------------------------------------
class Class5PlotBounded(OutputTestCase):
    """`plot` ends in bounded time and memory on any values, and writes well-formed XML."""

    def plot(self, document, *args):
        source = write_json(self.path("r.json"), document)
        output = self.path("fig.svg")
        return run("plot", source, "-o", output, *args, timeout=20), source, output

    def parse_svg(self, output):
        root = ET.parse(output).getroot()  # raises on malformed XML
        self.assertEqual(root.tag, NS + "svg")
        return root

    def tick_labels(self, root):
        return [t.text for g in root.iter(NS + "g") if g.get("class") == "axes"
                for t in g.iter(NS + "text") if "label" not in (t.get("class") or "")]

    def assert_finite_coordinates(self, root):
        for element in root.iter():
            for name in ("x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "width", "height"):
                if element.get(name) is not None:  # the figure's own size is in inches
                    value = float(element.get(name).removesuffix("in"))
                    self.assertTrue(abs(value) < 1e6, (element.tag, name, value))

    def test_tick_steps_below_double_precision(self):
        for metric in ("erank", "erank_pct"):
            with self.subTest(metric=metric):
                document = result_document(layers=((0, 1e17), (1, 1e17 + 32)), metric=metric)
                result, _, output = self.plot(document, "--metric", metric)
                self.assert_ok(result)
                root = self.parse_svg(output)
                self.assert_finite_coordinates(root)
                self.assertLessEqual(len(self.tick_labels(root)), 40)

    def test_layer_index_near_int_max(self):
        for layers in (((0, 2.0), (2147483647, 3.0)), ((2147483646, 2.0), (2147483647, 3.0)),
                       ((2147483647, 2.0),)):
            with self.subTest(layers=layers):
                result, _, output = self.plot(result_document(layers=layers))
                self.assert_ok(result)
                root = self.parse_svg(output)
                self.assert_finite_coordinates(root)
                self.assertLessEqual(len(self.tick_labels(root)), 40)

    def test_values_near_the_double_limit_are_refused_naming_the_file(self):
        document = result_document(layers=((0, 1e308), (1, -1e308)), metric="erank_pct")
        result, source, output = self.plot(document, "--metric", "erank_pct")
        self.assert_error(result, source, "erank_pct")
        self.assertFalse(os.path.exists(output))

    def test_one_huge_value_still_plots(self):
        result, _, output = self.plot(result_document(layers=((0, 1e308),)))
        self.assert_ok(result)
        self.assert_finite_coordinates(self.parse_svg(output))

    def test_control_characters_in_labels_give_well_formed_xml(self):
        label = "a\x01b\x1b[31m\x7f\ufffe\U0001F600 <&>\"'"
        result, _, output = self.plot(result_document(label=label), "--title", "t\x02itle")
        self.assert_ok(result)
        root = self.parse_svg(output)
        labels = [g.get("data-label") for g in root.iter(NS + "g") if g.get("class") == "model"]
        self.assertEqual(labels, ["a\ufffdb\ufffd[31m\x7f\ufffd\U0001F600 <&>\"'"])

    def test_non_utf8_file_name_gives_well_formed_xml(self):
        source = os.path.join(os.fsencode(self.dir), b"panel\xff\x01.json")
        write_json(source, result_document())
        self.assert_ok(run("plot", source, "-o", self.path("fig.svg")))
        root = self.parse_svg(self.path("fig.svg"))
        titles = [g.get("data-title") for g in root.iter(NS + "g") if g.get("class") == "panel"]
        self.assertEqual(titles, ["panel\ufffd\ufffd"])


# -------------------------------------------------------------------------------------------------
class Class11NonUtf8AndStreamErrors(OutputTestCase):
    """Non-UTF-8 names give valid JSON (U+FFFD); a failed write to stdout is exit 2."""

    def test_non_utf8_checkpoint_path_gives_valid_json(self):
        folder = synth(os.path.join(os.fsencode(self.dir), b"model\xff\xfe"))
        for command in ("analyze", "inspect"):
            with self.subTest(command=command):
                result = run(command, folder, "--format", "json", "-q")
                self.assert_ok(result)
                document = json.loads(result.stdout.decode("utf-8"))  # strict: must be UTF-8
                if command == "analyze":
                    self.assertEqual(document["models"][0]["label"], "model\ufffd\ufffd")

    def test_non_utf8_label_to_a_file(self):
        folder = synth(self.path("ckpt"))
        output = self.path("out.json")
        self.assert_ok(run("analyze", folder, "--label", b"lab\xc3el", "--format", "json",
                           "-o", output, "-q"))
        with open(output, encoding="utf-8") as handle:
            self.assertEqual(json.load(handle)["models"][0]["label"], "lab\ufffdel")

    @unittest.skipUnless(os.path.exists("/dev/full"), "no /dev/full on this machine")
    def test_a_full_stdout_is_an_error(self):
        folder = synth(self.path("ckpt"))
        result_file = write_json(self.path("r.json"), result_document())
        commands = [("baseline", "--layers", "2"), ("analyze", folder, "-q"),
                    ("analyze", folder, "--format", "csv", "-q"), ("inspect", folder),
                    ("check", result_file, "--baseline", result_file)]
        for args in commands:
            with self.subTest(args=args):
                with open("/dev/full", "wb") as full:
                    result = run(*args, stdout=full)
                self.assert_error(result, "stdout", "no space left on device")


# -------------------------------------------------------------------------------------------------
class Class12ThreadsCap(OutputTestCase):
    """`--threads` beyond 4 × the processors is refused before any thread is made."""

    def setUp(self):
        super().setUp()
        self.folder = synth(self.path("ckpt"))
        self.cap = 4 * os.cpu_count()

    def test_far_too_many_threads_is_refused(self):
        for count in ("100000", str(self.cap + 1), "2147483647"):
            with self.subTest(count=count):
                line = self.assert_error(run("analyze", self.folder, "--threads", count, "-q"),
                                         "--threads", count)
                self.assertIn(str(self.cap), line)

    def test_the_cap_itself_works_under_the_memory_limit(self):
        result = run("analyze", self.folder, "--threads", str(self.cap), "--format", "json", "-q")
        self.assert_ok(result)
        self.assertEqual(len(json.loads(result.stdout)["models"][0]["layers"]), 2)


# -------------------------------------------------------------------------------------------------
class Class13InterruptedWrites(OutputTestCase):
    """SIGINT/SIGTERM/SIGHUP while `-o` is pending leave no temporary file."""

    @classmethod
    def setUpClass(cls):
        # Big enough that the analysis runs for a while after the output's temporary file exists.
        cls.ckpt_dir = tempfile.TemporaryDirectory()
        cls.ckpt = os.path.join(cls.ckpt_dir.name, "ckpt")
        # (32 MB; four representations take ~0.5 s on an idle core, against a 1 ms poll.)
        result = run("synth", "--family", "llama", "--layers", "8", "--heads", "8",
                     "--kv-heads", "8", "--head-dim", "64", "--seed", "1", "-o", cls.ckpt)
        assert result.returncode == 0, result.stderr

    @classmethod
    def tearDownClass(cls):
        cls.ckpt_dir.cleanup()

    def interrupt(self, signal_number):
        output = self.path("out.json")
        process = subprocess.Popen([harness.KVRANK, "analyze", self.ckpt, "--repr", "qk,ov,k,v",
                                    "--format", "json", "-o", output, "-q"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   preexec_fn=limit_memory)
        try:
            deadline = time.monotonic() + TIMEOUT
            while not debris(self.dir) and process.poll() is None:
                self.assertLess(time.monotonic(), deadline, "no temporary file appeared")
                time.sleep(0.001)
            self.assertIsNone(process.poll(), "the analysis ended before the signal; enlarge it")
            process.send_signal(signal_number)
            process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.assertEqual(process.returncode, -signal_number)  # re-raised: the caller sees it
        self.assertEqual(debris(self.dir), [])
        self.assertFalse(os.path.exists(output))

    def test_sigterm(self):
        self.interrupt(signal.SIGTERM)

    def test_sigint(self):
        self.interrupt(signal.SIGINT)

    def test_sighup(self):
        self.interrupt(signal.SIGHUP)

    def test_png_conversion_interrupted(self):
        result_file = write_json(self.path("r.json"), result_document())
        folder = self.path("bin")
        os.mkdir(folder)
        with open(os.path.join(folder, "rsvg-convert"), "w") as handle:
            # The pause lets kvrank record the child's pid after posix_spawnp returns (a gap of
            # microseconds that a loaded machine can stretch); the mark then says "signal now".
            handle.write("#!/bin/sh\nsleep 0.3\necho $$ > \"$TMPDIR_MARK\"\nexec sleep 60\n")
        os.chmod(os.path.join(folder, "rsvg-convert"), 0o755)
        mark = os.path.join(folder, "pid")
        env = dict(os.environ, PATH=folder + os.pathsep + os.environ["PATH"], TMPDIR_MARK=mark)
        process = subprocess.Popen([harness.KVRANK, "plot", result_file, "-o", "fig.png"],
                                   cwd=self.dir, preexec_fn=limit_memory,
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + TIMEOUT
            while not (os.path.exists(mark) and os.path.getsize(mark) > 0):
                self.assertLess(time.monotonic(), deadline, "the converter never started")
                time.sleep(0.01)
            self.assertNotEqual(debris(self.dir), [])  # the converter works on temporary files
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.assertEqual(process.returncode, -signal.SIGTERM)
        self.assertEqual(debris(self.dir), [])
        self.assertEqual(sorted(os.listdir(self.dir)), ["bin", "r.json"])
        with open(mark) as handle:  # the converter was stopped too
            converter = int(handle.read())
        deadline = time.monotonic() + 10
        while running(converter) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(running(converter), "the converter still runs")


# -------------------------------------------------------------------------------------------------
class Class15TerminalInjection(OutputTestCase):
    """Names from files and the command line reach the terminal with control characters escaped."""

    def assert_clean(self, text):
        for byte in (b"\x1b", b"\r", b"\x07", b"\xc2\x9b", b"\xe2\x80\xae"):
            self.assertNotIn(byte, text)

    def test_error_naming_a_missing_path(self):
        name = self.path("ckpt\x1b[2J\nkvrank: error: forged")
        line = self.assert_error(run("analyze", name))
        self.assert_clean(line.encode())
        self.assertIn("ckpt\\x1b[2J\\nkvrank: error: forged", line)

    def test_error_naming_a_tensor(self):
        evil = "model.layers.0.\x1b]0;owned\x07q_proj\u202e.weight\nforged"
        data = safetensors_bytes([(evil, "F32", (3,), b"\0" * 8)])  # 3 floats declared, 2 stored
        path = self.path("evil.safetensors")
        with open(path, "wb") as handle:
            handle.write(data)
        line = self.assert_error(run("inspect", path), path)
        self.assert_clean(line.encode())
        self.assertIn("\\x1b]0;owned\\x07q_proj\\u{202e}.weight\\nforged", line)

    def test_inspect_listing(self):
        name = "extra\x1b[31m.\rbias"
        data = safetensors_bytes([(name, "F32", (2,), b"\0" * 8)])
        path = self.path("listing.safetensors")
        with open(path, "wb") as handle:
            handle.write(data)
        result = run("inspect", path)
        self.assert_ok(result)
        self.assert_clean(result.stdout + result.stderr)
        self.assertIn(b"extra\\x1b[31m.\\rbias", result.stdout)

    def test_log_line_naming_a_label(self):
        # One layer of a 2-head llama whose head 0 is all zero: analyze warns, naming the label.
        folder = self.path("zero-head")
        os.mkdir(folder)
        rng = np.random.default_rng(5)
        weights = {name: rng.standard_normal((16, 16)).astype("<f4") for name in "qkvo"}
        weights["q"][:8] = 0  # head 0's query rows
        tensors = [("model.layers.0.self_attn.%s_proj.weight" % name, "F32", (16, 16),
                    weights[name].tobytes()) for name in "qkvo"]
        with open(os.path.join(folder, "model.safetensors"), "wb") as handle:
            handle.write(safetensors_bytes(tensors))
        with open(os.path.join(folder, "config.json"), "w") as handle:
            json.dump({"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2,
                       "num_key_value_heads": 2, "num_hidden_layers": 1}, handle)
        result = run("analyze", folder, "--label", "evil\x1b[2J\nkvrank: error: forged")
        self.assert_ok(result)
        self.assert_clean(result.stderr)
        lines = result.stderr.decode().splitlines()
        self.assertEqual(len(lines), 2, lines)  # the progress line (stderr is no terminal), the warning
        self.assertTrue(lines[0].startswith(
            "kvrank: model 1/1 evil\\x1b[2J\\nkvrank: error: forged: 1/1 layers, "), lines[0])
        self.assertIn("evil\\x1b[2J\\nkvrank: error: forged: layer 0: head(s) 0", lines[1])

    def test_labels_in_table_and_check_output(self):
        folder = synth(self.path("ckpt"))
        label = "lab\x1b[2Jel\nforged line"
        table = run("analyze", folder, "--label", label)
        self.assert_ok(table)
        self.assert_clean(table.stdout + table.stderr)
        self.assertIn(b"lab\\x1b[2Jel\\nforged line", table.stdout)
        current = write_json(self.path("current.json"), result_document(label=label))
        golden = write_json(self.path("golden.json"),
                            result_document(label=label, layers=((0, 1.0), (1, 1.0))))
        check = run("check", current, "--baseline", golden)
        self.assertEqual(check.returncode, 1, check.stderr)
        self.assert_clean(check.stdout + check.stderr)
        self.assertNotIn(b"\nforged", check.stdout)


if __name__ == "__main__":
    harness.main_unittest()
