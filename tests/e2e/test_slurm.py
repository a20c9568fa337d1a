"""End-to-end test of the Slurm recipe on a real single-node Slurm cluster on localhost.

Usage: python3 tests/e2e/test_slurm.py path/to/kvrank   (run from the repository root, as root)

Starts munged, slurmctld and slurmd (Debian's slurm-wlm + munge, installed by scripts/setup.sh) with
a generated key and slurm.conf in a temporary folder, on free ports of 127.0.0.1; submits
scripts/slurm/submit.sh over data/tiny/* (once one task per checkpoint, once in layer shards,
once with a task that fails and is rerun with the work folder's rerun-tasks.sh and merge.sh; once
with a stale KVRANK_SHARDS in the environment, a CRLF list, names starting with "-" and "%" in the
work folder); checks that names the task list cannot carry are refused before submitting;
waits for the merge jobs; and asserts each merged JSON equals a single-process `kvrank analyze`
of the same inputs byte for byte. Every daemon is stopped and the folder removed, also on failure.
Exit 77 (ctest SKIP) only when not root or the Slurm/munge programs are not installed.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import harness

SUBMIT = os.path.join(harness.SCRIPTS, "slurm", "submit.sh")
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo", "scancel", "squeue")
NODE = "kvrank-node"
TIMEOUT_S = 40  # per submission, for the array and its merge job
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                   "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def skip_reason():
    if os.geteuid() != 0:
        return "not root (slurmd and munged must run as root)"
    missing = [name for name in PROGRAMS if shutil.which(name) is None]
    if missing:
        return ("not installed: " + ", ".join(missing) +
                " (scripts/setup.sh installs the Debian packages slurm-wlm and munge)")
    return None


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


SLURM_CONF = """\
ClusterName=kvranktest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
# A container has no usable cgroups: track processes by parent PID, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
NodeName={node} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """munged + slurmctld + slurmd in the foreground as child processes, all state in `folder`."""

    def __init__(self, folder):
        self.dir = folder
        self.daemons = []
        self.env = dict(os.environ, SLURM_CONF=os.path.join(folder, "slurm.conf"))
        for name in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID"):  # when the test itself runs in a job
            self.env.pop(name, None)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_):
        self.stop()

    def write_config(self):
        munge = os.path.join(self.dir, "munge")
        for sub in ("munge", "state", "spool"):
            os.makedirs(os.path.join(self.dir, sub))
        os.chmod(self.dir, 0o755)  # munged wants its socket's folders traversable by all
        os.chmod(munge, 0o755)
        key = os.path.join(munge, "munge.key")
        with open(key, "wb") as out:
            out.write(os.urandom(1024))
        os.chmod(key, 0o400)
        ctld_port, slurmd_port = free_ports(2)
        with open(self.env["SLURM_CONF"], "w") as out:
            out.write(SLURM_CONF.format(host=socket.gethostname().split(".")[0], node=NODE,
                                        dir=self.dir, ctld_port=ctld_port,
                                        slurmd_port=slurmd_port, cpus=os.cpu_count() or 1))

    def spawn(self, name, *args):
        log = open(os.path.join(self.dir, name + ".out"), "w")
        self.daemons.append((name, subprocess.Popen([name, *args], env=self.env, stdout=log,
                                                    stderr=subprocess.STDOUT)))
        log.close()

    def start(self):
        self.write_config()
        munge = os.path.join(self.dir, "munge")
        self.spawn("munged", "--foreground", "--key-file=" + os.path.join(munge, "munge.key"),
                   "--socket=" + os.path.join(munge, "munge.socket"),
                   "--pid-file=" + os.path.join(munge, "munged.pid"),
                   "--log-file=" + os.path.join(munge, "munged.log"),
                   "--seed-file=" + os.path.join(munge, "munged.seed"))
        self.wait_for(lambda: os.path.exists(os.path.join(munge, "munge.socket")), "munged")
        self.spawn("slurmctld", "-D", "-i")
        self.spawn("slurmd", "-D", "-N", NODE)
        self.wait_for(lambda: self.slurm("sinfo", "-h", "-n", NODE, "-o", "%T",
                                         check=False).strip() == "idle", "an idle node")

    def wait_for(self, ready, what, timeout_s=20):
        deadline = time.monotonic() + timeout_s
        while not ready():
            for name, process in self.daemons:
                if process.poll() is not None:
                    raise AssertionError(f"{name} exited with {process.returncode}\n" + self.logs())
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {timeout_s} s\n" + self.logs())
            time.sleep(0.2)

    def slurm(self, *args, check=True):
        result = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed: {result.stderr}")
        return result.stdout

    def job_state(self, job):
        fields = self.slurm("scontrol", "show", "job", "-o", job).split()
        values = dict(field.split("=", 1) for field in fields if "=" in field)
        return values.get("JobState", "?"), values.get("Reason", "?")

    def logs(self):
        text = []
        for name in ("munged.out", "slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            path = os.path.join(self.dir, name)
            if os.path.exists(path):
                with open(path, errors="replace") as log:
                    text.append(f"--- {name} (tail)\n" + "".join(log.readlines()[-15:]))
        return "\n".join(text)

    def stop(self):
        if any(name == "slurmctld" and p.poll() is None for name, p in self.daemons):
            self.slurm("scancel", "--user=root", check=False)  # nothing left running on failure
        for name, process in reversed(self.daemons):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in reversed(self.daemons):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.daemons = []


def analyze_single(*args, cwd=None):
    # The array tasks run with --threads 1 (SLURM_CPUS_PER_TASK unset); results are byte-identical
    # for the same thread count (BLAS may sum in another order with more threads).
    result = harness.run("analyze", *args, "--threads", "1", "--format", "json", "-q", text=False,
                         timeout=120, cwd=cwd)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def run_script(cluster, *command, env=None, cwd=None):
    result = subprocess.run(command, env=dict(cluster.env, KVRANK=harness.KVRANK, **(env or {})),
                            capture_output=True, text=True, timeout=60, cwd=cwd)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result.stdout.split()


def job_logs(work):
    logs = ""
    for name in sorted(os.listdir(os.path.join(work, "logs"))):
        with open(os.path.join(work, "logs", name), errors="replace") as log:
            logs += f"--- {name}\n{log.read()}"
    return logs


def wait_for_job(cluster, job):
    """(state, reason) once `job` ended or can never start; fails after TIMEOUT_S."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        state, reason = cluster.job_state(job)
        if state in TERMINAL_STATES or reason == "DependencyNeverSatisfied":
            return state, reason
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job} still {state} ({reason}) after {TIMEOUT_S} s\n" +
                                 cluster.logs())
        time.sleep(0.3)


def merged_bytes(cluster, work, merge_job):
    state, reason = wait_for_job(cluster, merge_job)
    assert state == "COMPLETED", f"merge job {merge_job}: {state} ({reason})\n{job_logs(work)}"
    with open(os.path.join(work, "all.json"), "rb") as merged:
        return merged.read()


def submit(cluster, work, *args, env=None, cwd=None):
    """submit.sh … → (array job, merge job)."""
    return run_script(cluster, SUBMIT, "--work", work, "-o", os.path.join(work, "all.json"),
                      *args, env=env, cwd=cwd)


def submit_and_merge(cluster, work, *args):
    """submit.sh … → the merged file's bytes, after the array and merge jobs completed."""
    _, merge_job = submit(cluster, work, *args)
    return merged_bytes(cluster, work, merge_job)


def rerun_failed_task(cluster, tmp, checkpoint):
    """A task fails (its checkpoint is not there yet): the merge never starts. Once the checkpoint
    is in place, rerun-tasks.sh and merge.sh from the work folder finish the run."""
    late = os.path.join(tmp, "late", os.path.basename(checkpoint) + "-late")  # its own label
    work = os.path.join(tmp, "rerun")
    _, merge_job = submit(cluster, work, checkpoint, late)
    assert wait_for_job(cluster, merge_job) == ("PENDING", "DependencyNeverSatisfied"), \
        job_logs(work)
    cluster.slurm("scancel", merge_job)
    shutil.copytree(checkpoint, late)
    [rerun_job] = run_script(cluster, os.path.join(work, "rerun-tasks.sh"), "1")
    [merge_job] = run_script(cluster, os.path.join(work, "merge.sh"), rerun_job)
    return merged_bytes(cluster, work, merge_job), analyze_single(checkpoint, late)


def command_line_settings_win_and_odd_names_work(cluster, tmp, tiny):
    """A stale KVRANK_SHARDS exported in the caller's shell, a --list with CRLF
    line ends, a checkpoint path starting with "-" and a label starting with "-", and "%" (an
    sbatch filename pattern) in the work folder: the merged result is still a single analyze's."""
    os.symlink(os.path.abspath(tiny[0]), os.path.join(tmp, "-dash"))
    second = os.path.abspath(tiny[1])
    with open(os.path.join(tmp, "crlf.tsv"), "w", newline="") as out:
        out.write("-dash\t-dash label\r\n\r\n" + second + "\r\n")
    work = os.path.join(tmp, "odd%A%%folder")
    _, merge_job = submit(cluster, work, "--shards", "2", "--list", "crlf.tsv", "--", "--layers",
                          "0-2", env={"KVRANK_SHARDS": "5"}, cwd=tmp)
    merged = merged_bytes(cluster, work, merge_job)
    expected = analyze_single("./-dash", second, "--label=-dash label",
                              "--label=" + os.path.basename(second), "--layers", "0-2", cwd=tmp)
    assert merged == expected, "merged JSON differs from a single analyze"
    logs = os.listdir(os.path.join(work, "logs"))
    assert len([name for name in logs if name.startswith("task-")]) == 4, logs


def refused_before_submitting(cluster, tmp, tiny):
    """Names the task list cannot carry are refused by submit.sh (exit 2), nothing submitted."""
    env = dict(cluster.env, KVRANK=harness.KVRANK)
    with open(os.path.join(tmp, "no-checkpoint.tsv"), "w") as out:
        out.write(tiny[0] + "\n\tlabel only\n")
    cases = [("new\nline", "newline or TAB"), ("a\ttab", "newline or TAB"),
             ("--list", "a line without a checkpoint")]
    for name, message in cases:
        args = ["--list", os.path.join(tmp, "no-checkpoint.tsv")] if name == "--list" else [name]
        work = os.path.join(tmp, "refused")
        result = subprocess.run([SUBMIT, "--work", work, "-o", os.path.join(work, "all.json"),
                                 *args], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and message in result.stderr, (name, result.stderr)
        assert result.stdout == "", result.stdout  # no job ids: nothing was submitted
    assert cluster.slurm("squeue", "-h", "-o", "%i").strip() == "", "a job was submitted"


def demo_models():
    """data/tiny/*: the demo checkpoints (folders), sorted by name."""
    folder = os.path.join("data", "tiny")
    return sorted(os.path.join(folder, name) for name in os.listdir(folder)
                  if os.path.isdir(os.path.join(folder, name)))


def run_tests(tmp):
    tiny = demo_models()
    assert len(tiny) >= 2, f"expected the demo models in data/tiny, found {tiny}"
    per_checkpoint_expected = analyze_single(*tiny)
    sharded = {tiny[0]: "first, r=1", tiny[1]: "second model"}  # labels given in a --list
    sharded_args = ["--repr", "qk,k", "--layers", "0-2"]
    labels = [arg for label in sharded.values() for arg in ("--label", label)]
    sharded_expected = analyze_single(*sharded, *labels, *sharded_args)
    sharded_list = os.path.join(tmp, "sharded.tsv")
    with open(sharded_list, "w") as out:
        out.writelines(f"{path}\t{label}\n" for path, label in sharded.items())
    with Cluster(os.path.join(tmp, "cluster")) as cluster:
        # One task per checkpoint.
        merged = submit_and_merge(cluster, os.path.join(tmp, "per-checkpoint"), *tiny)
        assert merged == per_checkpoint_expected, "merged JSON differs from a single analyze"
        print(f"ok: {len(tiny)} checkpoints, one array task each, merged == single analyze")
        # Layer shards: 3 layers in 2 shards per checkpoint, two representations.
        merged = submit_and_merge(cluster, os.path.join(tmp, "sharded"), "--shards", "2",
                                  "--list", sharded_list, "--", *sharded_args)
        assert merged == sharded_expected, "merged sharded JSON differs from a single analyze"
        print(f"ok: {len(sharded)} checkpoints x 2 layer shards, merged == single analyze")
        command_line_settings_win_and_odd_names_work(cluster, tmp, tiny)
        print("ok: stale KVRANK_SHARDS, CRLF list, '-' names, '%' in the work folder")
        refused_before_submitting(cluster, tmp, tiny)
        print("ok: newline/TAB names and label-only lines refused before submitting")
        merged, expected = rerun_failed_task(cluster, tmp, tiny[2])
        assert merged == expected, "merged JSON after a rerun differs from a single analyze"
        print("ok: a failed task rerun with rerun-tasks.sh, merge.sh: merged == single analyze")


def main():
    harness.kvrank_from_argv()
    reason = skip_reason()
    if reason:
        harness.skip(reason)
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="kvrank-slurm-")
    os.chmod(tmp, 0o755)  # munged checks every folder above its socket
    try:
        run_tests(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"ok: Slurm e2e test in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
