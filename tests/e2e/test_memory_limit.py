"""kvrank under real address-space limits (ulimit -v, RLIMIT_AS): every run ends within 10 s with
exit 0 (and the numbers of an unlimited run) or exit 2 and one line naming the limit; never a hang
(OpenBLAS retries a failed buffer allocation forever), never exit 1 (libgomp's "Thread creation
failed") or 3 (docs/input-limits.md, "Memory limits").

Usage: python3 tests/e2e/test_memory_limit.py path/to/kvrank   (run from the repository root)
Each run goes through `timeout`, so a hang fails this test instead of hanging CI. Skipped (exit 77)
for a binary built with AddressSanitizer, which reserves terabytes of address space up front.
"""
import json
import os
import resource
import subprocess
import time

import harness

MiB = 1 << 20
LIMITS = [256 * MiB, 512 * MiB, 640 * MiB, 1024 * MiB, 2048 * MiB, 4096 * MiB, 8192 * MiB]
ENOUGH = 2048 * MiB  # at and above this, the tiny models must be analysed (exit 0)
TOO_SMALL = 256 * MiB  # below what the libraries need to start: exit 2
SECONDS = 10
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                    "KVRANK_THREADS_FITTED")
ENVIRONMENTS = {"unset": {}, "64": {"OMP_NUM_THREADS": "64", "OPENBLAS_NUM_THREADS": "64"},
                "1": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}}
INPUTS = [os.path.join(harness.TINY, name) for name in ("mha", "mla", "lrkv-r2")]


def environment(settings):
    env = {name: value for name, value in os.environ.items() if name not in THREAD_VARIABLES}
    # libgomp's spinning waits make a 0.5 s run take 5 s on a loaded 2-core CI machine; this test
    # is about hangs, so the threads sleep while they wait.
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    env.update(settings)
    return env


def run_limited(limit, threads, settings):
    """kvrank analyze INPUTS under RLIMIT_AS = limit, through `timeout`: (exit code, stdout,
    stderr, seconds)."""
    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    command = ["timeout", "-s", "KILL", str(SECONDS), harness.KVRANK, "analyze", *INPUTS,
               "--format", "json", "-q"]
    if threads:
        command += ["--threads", str(threads)]
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, env=environment(settings),
                          preexec_fn=limit_address_space, timeout=SECONDS + 20)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started


def eranks(document):
    return [(model["label"], model["repr"], layer["layer"], layer["erank"])
            for model in document["models"] for layer in model["layers"]]


def main():
    harness.kvrank_from_argv()
    if harness.built_with_asan(harness.KVRANK):
        harness.skip("AddressSanitizer reserves terabytes of address space: no RLIMIT_AS applies")
    reference = harness.analyze_json(*INPUTS)
    failures = harness.Failures()
    print(f"{'limit':>9} {'threads':>8} {'env':>6} {'exit':>5} {'seconds':>8}")
    for limit in LIMITS:
        for threads in (None, 4):
            for name, settings in ENVIRONMENTS.items():
                code, out, err, seconds = run_limited(limit, threads, settings)
                case = f"ulimit -v {limit // 1024} --threads {threads or 'default'} env {name}"
                print(f"{limit // MiB:>6} MiB {threads or 'default':>8} {name:>6} {code:>5} "
                      f"{seconds:>8.2f}")
                check_run(failures, case, limit, code, out, err, reference)
    failures.finish("test_memory_limit", "every run under a limit ended in time, exit 0 or 2")


def check_run(failures, case, limit, code, out, err, reference):
    if code in (-9, 124, 137):
        failures.append(f"{case}: still running after {SECONDS} s (a hang)")
    elif code not in (0, 2):
        failures.append(f"{case}: exit {code}, expected 0 or 2: {err.strip()[:300]}")
    elif code == 2:
        lines = err.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("kvrank: error: ") or "limit" not in err:
            failures.append(f"{case}: exit 2 without one line naming the limit: {err[:300]!r}")
        if limit >= ENOUGH:
            failures.append(f"{case}: refused although the tiny models fit: {err.strip()}")
    else:
        if limit <= TOO_SMALL:
            failures.append(f"{case}: exit 0 where not even one thread fits")
        try:
            found, expected = eranks(json.loads(out)), eranks(reference)
            same = len(found) == len(expected) and all(
                a[:3] == b[:3] and harness.close(a[3], b[3]) for a, b in zip(found, expected))
        except (ValueError, KeyError) as error:
            same = False
            err = f"{err} (output: {error})"
        if not same:
            failures.append(f"{case}: exit 0 but not the numbers of an unlimited run: {err[:300]}")


if __name__ == "__main__":
    main()
