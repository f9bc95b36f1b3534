#!/usr/bin/env bash
# Pretrain (or resume) the English MLMs of dupbert.pretrain.MODELS in the background, one process
# and one torch thread each, niced: every `checkpoint_every` steps a checkpoint in $WORK/<name>/
# (default: the dupbert cache's pretrain/, outside the working tree, so that a fresh checkout
# resumes), rows appended to results/cpu/pretrain-loss.csv and results/cpu/emergence.csv, and
# those two files committed to git as they change (COMMIT=1), so a session that ends mid-run
# loses at most the steps since the last checkpoint. Re-running the
# script resumes every run (book/reproduce.md, "The English models", says how long each takes).
#
#   MODELS="minilm-mlm-en" setsid nohup bash scripts/pretrain.sh > .cache/pretrain.log 2>&1 < /dev/null &
#
# Started with `setsid`, the script lowers its session's autogroup to NICE, so that the runs take
# only cores nothing else wants (see scripts/cpu_study.sh). Environment: MODELS (bert-en-small
# albert-en-small), WORK, NICE (19), COMMIT (1), POLL_S (300), PYTHON (.venv/bin/python).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${DUPBERT_DATA_DIR:=$(cd ../shared/data 2>/dev/null && pwd)}"
export DUPBERT_DATA_DIR OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1
PYTHON="${PYTHON:-.venv/bin/python}"
MODELS="${MODELS:-bert-en-small albert-en-small}"
NICE="${NICE:-19}"
COMMIT="${COMMIT:-1}"
POLL_S="${POLL_S:-300}"
RESULTS=(results/cpu/pretrain-loss.csv results/cpu/emergence.csv)
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
  echo "$NICE" > /proc/self/autogroup 2>/dev/null || true
fi
WORK="${WORK:-$("$PYTHON" -c 'from dupbert.zoo import cache_dir; print(cache_dir() / "pretrain")')}"
mkdir -p "$WORK" .cache
echo "$(date -u +%FT%TZ) checkpoints and prepared data in $WORK"

commit_rows() {
  [ "$COMMIT" = 1 ] || return 0
  git add -- "${RESULTS[@]}" 2>/dev/null || return 0
  git diff --cached --quiet -- "${RESULTS[@]}" && return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do  # another git command may hold the index for a moment
    if git commit -q -m "Pretraining ($MODELS): rows in results/cpu (committed as they land)" \
        -- "${RESULTS[@]}"; then
      echo "$(date -u +%FT%TZ) committed pretraining rows"
      return 0
    fi
    sleep 3
  done
}

# tokenizers and packed data are shared between runs: build each once before the runs start
for name in $MODELS; do
  nice -n "$NICE" "$PYTHON" -c "from dupbert.pretrain import MODELS, prepare; import os, sys
prepare(MODELS[sys.argv[1]], os.environ['DUPBERT_DATA_DIR'], sys.argv[2])" "$name" "$WORK" || exit $?
done
pids=()
for name in $MODELS; do
  nice -n "$NICE" "$PYTHON" -m dupbert.pretrain "$name" --work "$WORK" >> "$WORK/$name.log" 2>&1 &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null; commit_rows; exit 143' INT TERM
running() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
while running; do
  sleep "$POLL_S"
  commit_rows
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
commit_rows
echo "$(date -u +%FT%TZ) pretraining finished with status $status"
exit $status
