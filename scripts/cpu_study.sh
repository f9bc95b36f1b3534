#!/usr/bin/env bash
# The pre-registered CPU fine-tuning study (notebooks/params/cpu/rq3.yaml), run in the background
# across sessions: `dupbert finetune --profile` at the lowest CPU priority (scripts/background.sh:
# nice 19, so tests and builds on the same cores always come first), and every run committed to
# git as soon as its row lands in results/cpu/rq3.jsonl (with its per-example outputs), so a
# session that ends mid-run loses at most the run in progress; the next
# `bash scripts/cpu_study.sh` resumes from the rows.
#
#   setsid nohup bash scripts/cpu_study.sh > .cache/cpu-study.log 2>&1 < /dev/null &
#
# Environment: PROFILE_FILE (notebooks/params/cpu/rq3.yaml; PROFILE_FILES, several separated by
# spaces, runs them one after another, stopping at the first that fails), POLL_S (20), NICE (19),
# COMMIT (1; 0 only runs), DUPBERT (.venv/bin/dupbert), THREADS (1: torch's intra-op threads;
# every row records its thread count, and runs are bit-identical for a given count),
# WORKERS (2: processes of one thread each, shards i/WORKERS of every model and task, appending
# to the one results file under its lock; niced, they take the cores only while nothing else
# wants them). A run's key does not depend on WORKERS, so a resume may use another count.
# Stop it with `kill <pid>`: the runs in progress are lost, every finished one is committed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/background.sh
lower_priority
POLL_S="${POLL_S:-20}"
DUPBERT="${DUPBERT:-.venv/bin/dupbert}"

# study PROFILE: run one profile's missing runs to the end
study() {
  local PROFILE="$1" results outputs
  # the results file and the per-example outputs folder (none when the profile's outputs_dir is null)
  read -r results outputs < <("${DUPBERT%/dupbert}/python" -c "
import sys, yaml
p = yaml.safe_load(open(sys.argv[1]))
print(p['results_path'], p.get('outputs_dir') or '')" "$PROFILE")
  paths=("$results")
  [ -n "$outputs" ] && paths+=("$outputs")
  rows() { local n=0; [ -f "$results" ] && n=$(grep -c . "$results"); echo "${n:-0}"; }
  commit_rows() {
    commit_paths "CPU study: $(rows) runs in $results (committed as they land)" "${paths[@]}"
  }
  echo "$(date -u +%FT%TZ) study $PROFILE: $(rows) runs so far in $results"
  WORKER_PIDS=()
  for ((i = 0; i < ${WORKERS:-2}; i++)); do
    nice -n "$NICE" "$DUPBERT" finetune --profile "$PROFILE" --shard "$i/${WORKERS:-2}" &
    WORKER_PIDS+=($!)
  done
  watch_workers "$POLL_S" commit_rows
  local status=$?
  echo "$(date -u +%FT%TZ) study $PROFILE finished with status $status: $(rows) runs in $results"
  return "$status"
}

for profile in ${PROFILE_FILES:-${PROFILE_FILE:-notebooks/params/cpu/rq3.yaml}}; do
  study "$profile" || exit $?
done
