#!/usr/bin/env bash
# The RQ3 `gpu` profile (notebooks/params/gpu/rq3.yaml) on one GPU, for the models packed into
# .gpu-payload/ by `python scripts/gpu_payload.py pack --models ...` (see book/reproduce.md, "The GPU run").
#
# Several trainings at once: WORKERS processes share the card, each running shard i/WORKERS of every
# (model, task) sweep, tasks in the profile's order (SNLI and SQuAD 2.0 first). Each run's row is
# appended as soon as it exists; every SNAPSHOT_S seconds the rows of all shards are merged into
# $OUT/rq3.jsonl and the per-example outputs archived into $OUT/rq3-outputs.tar (both replaced
# atomically), so a run cut off by its time limit still returns everything it finished. After
# DEADLINE_S seconds the workers are stopped and the last snapshot is taken.
#
# Environment: OUT (folder for the files that come back; default ./gpu-out), PAYLOAD (.gpu-payload),
# WORKERS (12), DEADLINE_S (270), SNAPSHOT_S (20), DEVICE (cuda), PYTHON (python3), PROFILE_FILE
# (notebooks/params/gpu/rq3.yaml; the one the payload was packed for).
# Back here: `python scripts/gpu_payload.py import <returned folder>`, then the chapters:
# `make book PROFILE=gpu NOTEBOOKS="notebooks/rq3.ipynb notebooks/rq4.ipynb notebooks/rq5.ipynb"`
# (the sweep finds every run done and only analyses).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

OUT="${OUT:-$PWD/gpu-out}"
PAYLOAD="${PAYLOAD:-.gpu-payload}"
WORKERS="${WORKERS:-12}"
DEADLINE_S="${DEADLINE_S:-270}"
SNAPSHOT_S="${SNAPSHOT_S:-20}"
DEVICE="${DEVICE:-cuda}"
PYTHON="${PYTHON:-python3}"
PROFILE="${PROFILE_FILE:-notebooks/params/gpu/rq3.yaml}"
mkdir -p "$OUT"
work=$(mktemp -d)
log="$OUT/gpu-run.log"
exec > >(tee -a "$log") 2>&1
started=$(date +%s)
say() { echo "[gpu_rq3 +$(( $(date +%s) - started ))s] $*"; }

[ -f "$PAYLOAD/models.txt" ] || { say "no $PAYLOAD/models.txt: run scripts/gpu_payload.py pack first"; exit 2; }
PAYLOAD="$(cd "$PAYLOAD" && pwd)"
if ! "$PYTHON" -c "import datasets, dill, multiprocess" 2> /dev/null \
    && compgen -G "$PAYLOAD/wheels/*.whl" > /dev/null; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$work/site" "$PAYLOAD"/wheels/*.whl || { say "wheel install failed"; exit 2; }
fi
export PYTHONPATH="$PWD:$work/site${PYTHONPATH:+:$PYTHONPATH}"
export DUPBERT_CACHE="$PAYLOAD/cache" DUPBERT_DATA_DIR="$PAYLOAD/data"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
export HF_HOME="$work/hf" PYTHONUNBUFFERED=1
"$PYTHON" scripts/gpu_payload.py unpack --from "$PAYLOAD" || exit 2
mapfile -t models < "$PAYLOAD/models.txt"
model_args=(); for m in "${models[@]}"; do model_args+=(--model "$m"); done
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv" 2>&1 || true
"$PYTHON" -c "import torch, transformers, datasets; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'datasets', datasets.__version__, 'gpu',
torch.cuda.get_device_name() if torch.cuda.is_available() else None)"
say "models ${models[*]}; $WORKERS workers; deadline ${DEADLINE_S}s"

snapshot() {
  "$PYTHON" -m dupbert.cli merge "$work/merged.jsonl" "$work"/shard-*.jsonl > /dev/null 2>&1 \
    && mv "$work/merged.jsonl" "$OUT/rq3.jsonl"
  if compgen -G "$work/outputs/*.npz" > /dev/null; then
    tar -cf "$work/outputs.tar" -C "$work/outputs" . && mv "$work/outputs.tar" "$OUT/rq3-outputs.tar"
  fi
}

pids=()
for ((i = 0; i < WORKERS; i++)); do
  "$PYTHON" -m dupbert.cli finetune --profile "$PROFILE" "${model_args[@]}" --device "$DEVICE" \
    --shard "$i/$WORKERS" --results "$work/shard-$i.jsonl" --outputs-dir "$work/outputs" \
    > "$work/worker-$i.log" 2>&1 &
  pids+=($!)
done

while :; do
  sleep "$SNAPSHOT_S"
  running=0; for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=$((running + 1)); done
  elapsed=$(( $(date +%s) - started ))
  snapshot
  done_runs=$(cat "$work"/shard-*.jsonl 2>/dev/null | wc -l)
  say "$done_runs runs done, $running workers running"
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null | sed 's/^/  gpu: /'
  [ "$running" -eq 0 ] && break
  if [ "$elapsed" -ge "$DEADLINE_S" ]; then
    say "deadline reached: stopping the workers (finished runs are kept)"
    kill "${pids[@]}" 2>/dev/null; sleep 3; kill -9 "${pids[@]}" 2>/dev/null
    break
  fi
done
wait "${pids[@]}" 2>/dev/null
snapshot
failed=0
for ((i = 0; i < WORKERS; i++)); do
  if grep -q "Traceback\|dupbert: error" "$work/worker-$i.log"; then
    failed=1; say "worker $i failed:"; tail -n 25 "$work/worker-$i.log"
  fi
done
tail -n 3 "$work"/worker-*.log > "$OUT/workers-tail.log" 2>&1
say "$(cat "$OUT/rq3.jsonl" 2>/dev/null | wc -l) runs in $OUT/rq3.jsonl"
rm -rf "$work"
exit "$failed"
