#!/usr/bin/env python3
"""The documented install (docs/python.md): `cmake --install BUILD --component python --prefix
VENV` puts the package in a virtual environment's site-packages, then `import kvrank` there works without the build folder on
the path. Skipped (exit 77) where python3 has no venv module (Debian: python3-venv).

  python3 python/tests/test_install.py build/kvrank   (ctest sets KVRANK_BUILD_DIR)
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import harness  # noqa: E402


def main():
    harness.kvrank_from_argv()
    build = os.environ.get("KVRANK_BUILD_DIR")
    if not build:
        sys.exit("test_install.py: KVRANK_BUILD_DIR is not set (ctest sets it)")
    if importlib.util.find_spec("venv") is None:
        harness.skip("python3 has no venv module (Debian: python3-venv)")
    with tempfile.TemporaryDirectory() as tmp:
        env_dir = os.path.join(tmp, "venv")
        # --system-site-packages: numpy (and pandas, torch) from Debian, as a user's venv would.
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                        env_dir], check=True)
        python = os.path.join(env_dir, "bin", "python")
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('platlib'))"],
                              check=True, capture_output=True, text=True).stdout.strip()
        subprocess.run(["cmake", "--install", build, "--component", "python", "--prefix", env_dir],
                       check=True, capture_output=True)
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        probe = ("import kvrank, sys; print(kvrank.__file__); "
                 "r = kvrank.analyze(sys.argv[1]); print(len(r.to_dict()['models']))")
        proc = subprocess.run([python, "-c", probe, os.path.join(harness.TINY, "gqa")],
                              capture_output=True, text=True, env=env, cwd=tmp)
        if proc.returncode != 0:
            sys.exit(f"import from the venv failed:\n{proc.stderr}")
        where, models = proc.stdout.split()
        if not where.startswith(site) or models != "1":
            sys.exit(f"kvrank came from {where} (expected under {site}), models {models}")
    print("test_install.py: cmake --install into a venv, import kvrank from it: ok")


if __name__ == "__main__":
    main()
