#!/usr/bin/env bash
# The pre-registered CPU fine-tuning study (notebooks/params/cpu/rq3.yaml), run in the background
# across sessions: `dupbert finetune --profile` at the lowest CPU priority (nice 19, so tests and
# builds on the same cores always come first), and every run committed to git as soon as its row
# lands in results/cpu/rq3.jsonl (with its per-example outputs), so a session that ends mid-run
# loses at most the run in progress; the next `bash scripts/cpu_study.sh` resumes from the rows.
#
#   setsid nohup bash scripts/cpu_study.sh > .cache/cpu-study.log 2>&1 < /dev/null &
#
# With Linux's autogroup scheduling, `nice` only orders processes of one session: a niced worker
# still took half the cores from a test run started in another shell. Started with `setsid`, the
# script leads a session of its own and lowers that session's autogroup to NICE as well, so the
# workers take only cores nothing else wants.
#
# Environment: PROFILE_FILE (notebooks/params/cpu/rq3.yaml), POLL_S (20), NICE (19),
# COMMIT (1; 0 only runs), DUPBERT (.venv/bin/dupbert), THREADS (1: torch's intra-op threads; on
# cores shared with other work, two spinning threads made a run several times slower than one;
# every row records its thread count, and runs are bit-identical for a given count),
# WORKERS (2: processes of one thread each, shards i/WORKERS of every model and task, appending
# to the one results file under its lock; niced, they take the cores only while nothing else
# wants them). A run's key does not depend on WORKERS, so a resume may use another count.
# Stop it with `kill <pid>`: the runs in progress are lost, every finished one is committed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PROFILE="${PROFILE_FILE:-notebooks/params/cpu/rq3.yaml}"
POLL_S="${POLL_S:-20}"
NICE="${NICE:-19}"
COMMIT="${COMMIT:-1}"
DUPBERT="${DUPBERT:-.venv/bin/dupbert}"
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
  echo "$NICE" > /proc/self/autogroup 2>/dev/null || true  # this session only (see above)
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export OMP_NUM_THREADS="${THREADS:-1}" MKL_NUM_THREADS="${THREADS:-1}"
if [ -z "${DUPBERT_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  DUPBERT_DATA_DIR="$(cd ../shared/data && pwd)"
  export DUPBERT_DATA_DIR
fi

# the results file and the per-example outputs folder (none when the profile's outputs_dir is null)
read -r results outputs < <("${DUPBERT%/dupbert}/python" -c "
import sys, yaml
p = yaml.safe_load(open(sys.argv[1]))
print(p['results_path'], p.get('outputs_dir') or '')" "$PROFILE")

rows() { local n=0; [ -f "$results" ] && n=$(grep -c . "$results"); echo "${n:-0}"; }

commit_new_rows() {
  [ "$COMMIT" = 1 ] || return 0
  local n; n=$(rows)
  local paths=("$results")
  [ -n "$outputs" ] && paths+=("$outputs")
  git add -- "${paths[@]}" 2>/dev/null || return 0
  git diff --cached --quiet -- "${paths[@]}" && return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do  # another git command may hold the index for a moment
    if git commit -q -m "CPU study: $n runs in $results (committed as they land)" \
        -- "${paths[@]}"; then
      echo "$(date -u +%FT%TZ) committed: $n runs"
      return 0
    fi
    sleep 3
  done
  echo "$(date -u +%FT%TZ) could not commit $n runs (git busy); will retry" >&2
}

echo "$(date -u +%FT%TZ) study $PROFILE: $(rows) runs so far in $results"
WORKERS="${WORKERS:-2}"
workers=()
for ((i = 0; i < WORKERS; i++)); do
  nice -n "$NICE" "$DUPBERT" finetune --profile "$PROFILE" --shard "$i/$WORKERS" &
  workers+=($!)
done
trap 'kill "${workers[@]}" 2>/dev/null; commit_new_rows; exit 143' INT TERM
running() { local w; for w in "${workers[@]}"; do kill -0 "$w" 2>/dev/null && return 0; done; return 1; }
seen=$(rows)
while running; do
  sleep "$POLL_S"
  now=$(rows)
  if [ "$now" != "$seen" ]; then
    commit_new_rows
    seen=$now
  fi
done
status=0
for w in "${workers[@]}"; do wait "$w" || status=$?; done
commit_new_rows
echo "$(date -u +%FT%TZ) study finished with status $status: $(rows) runs in $results"
exit "$status"
