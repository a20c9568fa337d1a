#!/usr/bin/env bash
# Submits a kvrank run to Slurm: an array job (one task per checkpoint, or per layer shard) and a
# merge job that starts when every task succeeded (--dependency=afterok).
#
#   scripts/slurm/submit.sh [--shards N] [--max-running M] [--work DIR] -o ALL.json \
#       CHECKPOINT... | --list FILE  [-- ANALYZE_ARGS...]
#
#   --shards N       split each checkpoint's layers into N array tasks (--layer-shard I/N)
#   --max-running M  at most M tasks at once (sbatch --array=…%M)
#   --work DIR       list, parts and logs (default: ALL.json's name + .parts/ next to it)
#   --list FILE      checkpoints from FILE: one per line, optionally TAB and a label (CRLF line
#                    ends are read as LF; blank lines are skipped)
#   ANALYZE_ARGS     passed to every task (e.g. --repr qk,k --layers 0-11 --similarity)
#
# What the tasks could not read is refused here, before anything is submitted (exit 2): a
# checkpoint name with a newline or TAB (the list is one line per checkpoint, TAB before the
# label). Settings reach the jobs as script arguments, never as environment variables, so a stale
# KVRANK_SHARDS or KVRANK in the caller's shell cannot override them; "%" in the work folder is
# escaped in the log file patterns.
#
# Prints "ARRAY_JOB_ID MERGE_JOB_ID" on stdout. Resources (partition, time, CPUs, account) come
# from sbatch's own environment variables: SBATCH_PARTITION, SBATCH_TIMELIMIT, SBATCH_ACCOUNT, …,
# or per job from the #SBATCH lines of the two scripts. $KVRANK names the binary (default: kvrank
# on PATH); jobs run in the current folder, so relative checkpoint paths work.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  echo "usage: $0 [--shards N] [--max-running M] [--work DIR] -o ALL.json" \
    "CHECKPOINT... | --list FILE [-- ANALYZE_ARGS...]" >&2
  exit 2
}

shards=1 max_running="" work="" output="" list=""
checkpoints=() analyze_args=()
while (($# > 0)); do
  case $1 in
    --shards) shards=${2:?--shards needs a number}; shift 2 ;;
    --max-running) max_running=${2:?--max-running needs a number}; shift 2 ;;
    --work) work=${2:?--work needs a folder}; shift 2 ;;
    --list) list=${2:?--list needs a file}; shift 2 ;;
    -o | --output) output=${2:?-o needs a file}; shift 2 ;;
    --) shift; analyze_args=("$@"); break ;;
    -h | --help) usage ;;
    -*) echo "submit.sh: unknown option $1" >&2; usage ;;
    *) checkpoints+=("$1"); shift ;;
  esac
done
[[ -n "$output" ]] || { echo "submit.sh: -o ALL.json is required" >&2; usage; }
[[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "submit.sh: --shards: expected a positive number, found \"$shards\"" >&2; exit 2; }

command -v sbatch >/dev/null || { echo "submit.sh: no sbatch here (run on a Slurm login node)" >&2; exit 2; }
kvrank=${KVRANK:-$(command -v kvrank || true)}
[[ -x "$kvrank" ]] || { echo "submit.sh: no kvrank binary (put it on PATH or set KVRANK)" >&2; exit 2; }
kvrank=$(realpath "$kvrank")
output=$(realpath -m "$output")
work=$(realpath -m "${work:-$output.parts}")
mkdir -p "$work/parts" "$work/logs"

if [[ -n "$list" ]]; then
  [[ -f "$list" && -r "$list" ]] || { echo "submit.sh: --list: no readable file $list" >&2; exit 2; }
  sed 's/\r$//' "$list" | { grep -v '^$' || true; } > "$work/checkpoints.txt"
  if bad=$(grep -n -m1 $'^\t' "$work/checkpoints.txt"); then
    echo "submit.sh: $list: a line without a checkpoint before its TAB: ${bad:0:80}" >&2
    exit 2
  fi
else
  ((${#checkpoints[@]} > 0)) || { echo "submit.sh: no checkpoints given" >&2; usage; }
  for checkpoint in "${checkpoints[@]}"; do
    if [[ "$checkpoint" == *$'\n'* || "$checkpoint" == *$'\t'* || -z "$checkpoint" ]]; then
      echo "submit.sh: checkpoint $(printf '%q' "$checkpoint"): an empty name, or one with a" \
        "newline or TAB, cannot go in the task list (rename it, or link it under another name)" >&2
      exit 2
    fi
  done
  printf '%s\n' "${checkpoints[@]}" > "$work/checkpoints.txt"
fi
count=$(wc -l < "$work/checkpoints.txt")
((count > 0)) || { echo "submit.sh: $list lists no checkpoint" >&2; exit 2; }
tasks=$((count * shards))
rm -f "$work"/parts/part-*.json  # parts of an earlier run must not mix with this one

# merge must know the --layers selection the tasks were cut from.
merge_args=()
for ((i = 0; i < ${#analyze_args[@]}; ++i)); do
  case ${analyze_args[i]} in
    --layers) merge_args+=(--layers "${analyze_args[i + 1]:-}") ;;
    --layers=*) merge_args+=("${analyze_args[i]}") ;;
  esac
done

logs=${work//%/%%}/logs  # sbatch reads % in --output as a filename pattern
array=(--chdir="$PWD" --export=ALL --output="$logs/task-%A_%a.log"
       "$here/kvrank-array.sbatch" --shards "$shards" --kvrank "$kvrank"
       "$work/checkpoints.txt" "$work/parts" "${analyze_args[@]}")
merge=(--chdir="$PWD" --export=ALL --output="$logs/merge-%j.log"
       "$here/kvrank-merge.sbatch" --kvrank "$kvrank" "$work/parts" "$tasks" "$output"
       "${merge_args[@]}")

# When a task fails, the merge job never starts: these resubmit failed tasks, then the merge.
{
  echo '#!/usr/bin/env bash'
  echo '# Resubmits tasks of this run: rerun-tasks.sh 3,7-9 (task ids as in logs/task-JOB_ID.log)'
  echo 'set -euo pipefail'
  echo "exec sbatch --parsable --array=\"\${1:?which tasks, e.g. 3,7-9}\" $(printf '%q ' "${array[@]}")"
} > "$work/rerun-tasks.sh"
{
  echo '#!/usr/bin/env bash'
  echo '# Submits the merge again: merge.sh [JOB_ID] (starts when job JOB_ID succeeded, else now)'
  echo 'set -euo pipefail'
  echo "exec sbatch --parsable \${1:+--dependency=afterok:\$1} $(printf '%q ' "${merge[@]}")"
} > "$work/merge.sh"
chmod +x "$work/rerun-tasks.sh" "$work/merge.sh"

array_job=$(sbatch --parsable --array="0-$((tasks - 1))${max_running:+%$max_running}" "${array[@]}")
array_job=${array_job%%;*}  # "id;cluster" on multi-cluster setups
merge_job=$(sbatch --parsable --dependency="afterok:$array_job" "${merge[@]}")
merge_job=${merge_job%%;*}
echo "submit.sh: array job $array_job ($tasks tasks), merge job $merge_job -> $output (logs in $work/logs)" >&2
echo "$array_job $merge_job"
