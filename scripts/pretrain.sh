#!/usr/bin/env bash
# Pretrain (or resume) the MLMs of dupbert.training.pretrain.MODELS in the background, one after another,
# one process with one torch thread, niced (scripts/background.sh): every `checkpoint_every` steps
# a checkpoint in $DUPBERT_PRETRAIN_WORK/<name>/ (default: the dupbert cache's pretrain/, outside the working tree,
# so that a fresh checkout resumes), rows appended to results/cpu/pretrain-loss.csv and
# results/cpu/emergence.csv, and those two files committed to git as they change (COMMIT=1), so a
# session that ends mid-run loses at most the steps since the last checkpoint. Re-running the
# script resumes (book/reproduce.md, "The English models", says how long each run takes).
#
# One call runs one stage of each model (PretrainConfig.stage_steps: a stage fits in one working
# session), publishes it (python -m dupbert.training.pretrain NAME --publish) and commits its weights,
# card and pin (COMMIT=1; a model too large for the repository keeps its weights in the cache),
# so that the next call's stage starts from weights a fresh machine has.
#
#   MODELS="minilm-mlm-en" setsid nohup bash scripts/pretrain.sh > .cache/pretrain.log 2>&1 < /dev/null &
#
# Environment: MODELS (bert-en-small albert-en-small), DUPBERT_PRETRAIN_WORK, NICE (19),
# COMMIT (1), PUBLISH (1), POLL_S (300), THREADS (1), PYTHON (.venv/bin/python). Stops at the
# first run that fails.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/background.sh
lower_priority
PYTHON="${PYTHON:-.venv/bin/python}"
MODELS="${MODELS:-bert-en-small albert-en-small}"
POLL_S="${POLL_S:-300}"
PUBLISH="${PUBLISH:-1}"
RESULTS=(results/cpu/pretrain-loss.csv results/cpu/emergence.csv)
WORK="${DUPBERT_PRETRAIN_WORK:-$("$PYTHON" -c \
  'from dupbert.core.zoo import cache_dir; print(cache_dir() / "pretrain")')}" || exit 1
[ -n "$WORK" ] && mkdir -p "$WORK" .cache || { echo "no pretraining folder" >&2; exit 1; }
echo "$(date -u +%FT%TZ) checkpoints and prepared data in $WORK"

# tokenizers and packed data are shared between runs: build each once before the runs start
for name in $MODELS; do
  nice -n "$NICE" "$PYTHON" -c "from dupbert.training.pretrain import MODELS, prepare; import os, sys
prepare(MODELS[sys.argv[1]], os.environ['DUPBERT_DATA_DIR'], sys.argv[2])" "$name" "$WORK" || exit $?
done
for name in $MODELS; do
  publish=(); [ "$PUBLISH" = 1 ] && publish=(--publish)
  nice -n "$NICE" "$PYTHON" -m dupbert.training.pretrain "$name" --work "$WORK" "${publish[@]}" \
    >> "$WORK/$name.log" 2>&1 &
  WORKER_PIDS=($!)
  watch_workers "$POLL_S" commit_paths \
    "Pretraining ($name): rows in results/cpu (committed as they land)" "${RESULTS[@]}"
  status=$?
  echo "$(date -u +%FT%TZ) pretraining $name finished with status $status"
  [ "$status" = 0 ] || exit "$status"
  if [ "$PUBLISH" = 1 ]; then
    commit_paths "Pretraining ($name): a stage's weights, card and pin published" \
      "models/$name" models/sha256.json
  fi
done
