# Shared by scripts/pretrain.sh and scripts/cpu_study.sh (sourced, not run): a background worker
# at the lowest CPU priority whose result files are committed to git as they change.
#
# With Linux's autogroup scheduling, `nice` only orders processes of one session: a niced worker
# still took half the cores from a test run started in another shell. Started with `setsid`, a
# script leads a session of its own; lower_priority then lowers that session's autogroup to NICE
# as well, so the workers take only cores nothing else wants.

# Offline, one torch thread per process (on cores shared with other work, two spinning threads
# made a run several times slower than one), the data folder beside the repository by default.
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export OMP_NUM_THREADS="${THREADS:-1}" MKL_NUM_THREADS="${THREADS:-1}" DUPBERT_THREADS="${THREADS:-1}"
if [ -z "${DUPBERT_DATA_DIR:-}" ] && [ -d ../shared/data ]; then
  DUPBERT_DATA_DIR="$(cd ../shared/data && pwd)"
  export DUPBERT_DATA_DIR
fi
NICE="${NICE:-19}"
COMMIT="${COMMIT:-1}"

lower_priority() {  # this session's autogroup to NICE, when the script leads its session
  if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
    echo "$NICE" > /proc/self/autogroup 2>/dev/null || true
  fi
}

# commit_paths MESSAGE PATH...: commit PATHs (only they: nothing else staged is swept in) if they
# changed; with COMMIT=0, nothing. Retried while another git command holds the index.
commit_paths() {
  [ "$COMMIT" = 1 ] || return 0
  local message="$1"; shift
  git add -- "$@" 2>/dev/null || return 0
  git diff --cached --quiet -- "$@" && return 0
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    if git commit -q -m "$message" -- "$@"; then
      echo "$(date -u +%FT%TZ) committed: $message"
      return 0
    fi
    sleep 3
  done
  echo "$(date -u +%FT%TZ) could not commit (git busy); will retry: $message" >&2
}

# watch_workers POLL_S COMMAND...: every POLL_S seconds while any process of WORKER_PIDS runs,
# run COMMAND (it commits what landed); on INT/TERM, stop them, run COMMAND once more and exit
# 143. Once all have ended (noticed within CHECK_S seconds, so that the next run of a queue
# starts at once), run COMMAND and return the last non-zero exit status (0 if none).
WORKER_PIDS=()
CHECK_S="${CHECK_S:-10}"
watch_workers() {
  local poll="$1"; shift
  ON_POLL=("$@")
  trap 'kill "${WORKER_PIDS[@]}" 2>/dev/null; "${ON_POLL[@]}"; exit 143' INT TERM
  local p alive=1 status=0 waited=0
  while [ "$alive" = 1 ]; do
    sleep "$CHECK_S" & wait $!  # a signal is handled at once, not after the sleep
    waited=$((waited + CHECK_S))
    alive=0
    for p in "${WORKER_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    if [ "$alive" = 1 ] && [ "$waited" -ge "$poll" ]; then
      "${ON_POLL[@]}"
      waited=0
    fi
  done
  for p in "${WORKER_PIDS[@]}"; do wait "$p" || status=$?; done
  "${ON_POLL[@]}"
  return "$status"
}
