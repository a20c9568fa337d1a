"""kvrank as an installed library: `cmake --install` of the build tree into a fresh prefix, then
the consumer of examples/erank built against that prefix twice — with find_package(kvrank) and
with pkg-config — and run on data/tiny/mha; its per-layer effective ranks must match the
independent numpy reference. A broken export, a missing header, a link dependency the package
does not carry, or a private dependency leaking into a consumer's compile fails here.

Run from the repository root: python3 tests/e2e/test_install.py path/to/build/kvrank
"""
import json
import os
import re
import shutil
import subprocess
import tempfile

import harness

EXAMPLE = os.path.join(harness.ROOT, "examples", "erank")
CHECKPOINT = os.path.join(harness.TINY, "mha")
# Linked by the layers but never part of a consumer's compile (only inside $<LINK_ONLY:…>).
PRIVATE_DEPENDENCIES = ("ZLIB", "Threads", "OpenMP", "openblas", "dnnl")


def link_only(item):
    """Whether an item of INTERFACE_LINK_LIBRARIES only links: $<LINK_ONLY:…>, or a library file
    (found by hand, e.g. OpenBLAS), which carries no compile flags."""
    return item.startswith("\\$<LINK_ONLY:") or re.fullmatch(r"/.*\.(so|a)", item) is not None


def build_cache(build_dir):
    """The build tree's CMakeCache.txt as a dict of NAME → value."""
    cache = {}
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8") as file:
        for line in file:
            match = re.match(r"([A-Za-z0-9_]+):[A-Z]+=(.*)", line)
            if match:
                cache[match.group(1)] = match.group(2)
    return cache


def consumer_flags(cache):
    """The compiler and flags a consumer needs to link this build's libraries: the same compiler,
    and the sanitizers when the libraries were built with them."""
    flags = "-fsanitize=address,undefined" if cache.get("KVRANK_SANITIZE") == "ON" else ""
    return cache["CMAKE_CXX_COMPILER"], flags


def run(command, **options):
    proc = subprocess.run(command, capture_output=True, text=True, **options)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc.stdout


def installed(prefix, *patterns):
    """The installed files whose path (relative to prefix) matches any regex of `patterns`."""
    found = []
    for folder, _, files in os.walk(prefix):
        for name in files:
            relative = os.path.relpath(os.path.join(folder, name), prefix)
            if any(re.fullmatch(pattern, relative) for pattern in patterns):
                found.append(relative)
    return found


class InstallTest(harness.TestCase):
    @classmethod
    def setUpClass(cls):
        """One install and one reference run for all the tests."""
        cls.install_dir = tempfile.TemporaryDirectory()
        cls.prefix = os.path.join(cls.install_dir.name, "prefix")
        cls.build_dir = os.path.dirname(harness.KVRANK)
        cls.cache = build_cache(cls.build_dir)
        run(["cmake", "--install", cls.build_dir, "--prefix", cls.prefix])
        ref = harness.run_script("reference.py", "llama", CHECKPOINT, "--repr", "qk")
        cls.want = [(layer["layer"], layer["erank"]) for layer in json.loads(ref.stdout)["layers"]]

    @classmethod
    def tearDownClass(cls):
        cls.install_dir.cleanup()

    def check_output(self, program):
        got = [line.split() for line in run([program, CHECKPOINT]).splitlines()]
        self.assertEqual([int(layer) for layer, _ in got], [layer for layer, _ in self.want])
        for (layer, erank), (_, want) in zip(got, self.want):
            self.assertTrue(harness.close(float(erank), want),
                            f"layer {layer}: example {erank}, reference {want}")

    def test_installs_the_command_library_and_package_files(self):
        expected = [r"bin/kvrank", r"include/kvrank/analysis/analysis\.hpp",
                    r"lib.*/libkvrank_base\.a",
                    r"lib.*/libkvrank_app\.a", r"include/kvrank/app/requests\.hpp", r"lib.*/cmake/kvrank/kvrankConfig\.cmake",
                    r"lib.*/cmake/kvrank/kvrankConfigVersion\.cmake",
                    r"lib.*/pkgconfig/kvrank\.pc", r"share/doc/kvrank/copyright",
                    r"share/doc/kvrank/README\.md"]
        if os.path.exists(os.path.join(self.build_dir, "kvrank.1.gz")):  # built with help2man
            expected += [r"share/man/man1/kvrank\.1\.gz", r"share/man/man1/kvrank-analyze\.1\.gz",
                         r"share/man/man1/kvrank-synth\.1\.gz"]  # one page per subcommand
        for pattern in expected:
            self.assertTrue(installed(self.prefix, pattern), f"nothing installed matches {pattern}")

    def test_private_dependencies_stay_out_of_the_consumers_compile(self):
        (targets,) = installed(self.prefix, r"lib.*/cmake/kvrank/kvrankTargets\.cmake")
        with open(os.path.join(self.prefix, targets), encoding="utf-8") as file:
            text = file.read()
        for line in text.splitlines():
            if "INTERFACE_" not in line:
                continue
            links = re.fullmatch(r'\s*INTERFACE_LINK_LIBRARIES "(.*)"', line)
            if links:  # what a consumer compiles with, not what it only links
                line = ";".join(item for item in links.group(1).split(";") if not link_only(item))
            leaked = [name for name in PRIVATE_DEPENDENCIES if name in line]
            self.assertEqual(leaked, [], f"{targets}: {line.strip()}")
        # The version is a function (kvrank/base/version.hpp), not a definition in the consumer's
        # flags.
        self.assertNotIn("KVRANK_VERSION", text, f"{targets} defines KVRANK_VERSION for consumers")

    def test_find_package_consumer_matches_the_reference(self):
        compiler, flags = consumer_flags(self.cache)
        build = self.path("erank-cmake")
        configure = ["cmake", "-S", EXAMPLE, "-B", build, f"-DCMAKE_PREFIX_PATH={self.prefix}",
                     f"-DCMAKE_CXX_COMPILER={compiler}", f"-DCMAKE_CXX_FLAGS={flags}"]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        run(configure)
        run(["cmake", "--build", build])
        self.check_output(os.path.join(build, "erank"))

    def test_pkg_config_consumer_matches_the_reference(self):
        compiler, flags = consumer_flags(self.cache)
        (pc_file,) = installed(self.prefix, r"lib.*/pkgconfig/kvrank\.pc")
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(os.path.join(self.prefix, pc_file)))
        pkg_flags = run(["pkg-config", "--cflags", "--libs", "kvrank"], env=env).split()
        program = self.path("erank-pkg-config")
        run([compiler, "-std=c++20", *flags.split(), os.path.join(EXAMPLE, "main.cpp"), "-o",
             program, *pkg_flags])
        self.check_output(program)


if __name__ == "__main__":
    harness.main_unittest()
