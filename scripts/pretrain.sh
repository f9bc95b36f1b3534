#!/usr/bin/env bash
# Pretrain (or resume) bert-en-small and albert-en-small at once, one process and one torch thread
# each, niced, in the background-safe way: every 100 steps a checkpoint in .cache/pretrain/<name>/,
# rows appended to results/cpu/pretrain-loss.csv and results/cpu/emergence.csv. Re-running the
# script resumes both (issue 26; book/reproduce.md, "The English models", says how long it takes).
#   MODELS="bert-en-small" scripts/pretrain.sh     only one model
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${DUPBERT_DATA_DIR:=$(cd ../shared/data 2>/dev/null && pwd)}"
export DUPBERT_DATA_DIR OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false
PYTHON="${PYTHON:-.venv/bin/python}"
MODELS="${MODELS:-bert-en-small albert-en-small}"
mkdir -p .cache/pretrain
# the tokenizer and packed data are shared: build them once before the two runs start
"$PYTHON" -c "from dupbert.pretrain import MODELS, prepare; import os; prepare(MODELS['bert-en-small'], os.environ['DUPBERT_DATA_DIR'], '.cache/pretrain')"
pids=()
for name in $MODELS; do
  nice -n 10 "$PYTHON" -m dupbert.pretrain "$name" > ".cache/pretrain/$name.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
