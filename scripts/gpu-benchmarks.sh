#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md, on the project's H100 (or any NVIDIA machine with
# vLLM importable): tolk's own commands, one step after another, each writing JSON, markdown
# and charts under $RESULTS/<step>. Steps (default: all, in this order):
#   smoke journey overhead run-1b baseline-1b profile versus tune run-7b
#
#   bash scripts/gpu-benchmarks.sh [STEP...]
#
# On the project's H100 (no vLLM, no package registry) vLLM comes from the kit that
# ../shared/gpu/make-kit.sh builds; see docs/benchmarks.md ("On an NVIDIA H100") for the
# device calls. It runs from a private copy of the checkout, so the tree it was started from
# may change meanwhile; $RESULTS/progress.log says which step is running.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
RESULTS=${RESULTS:-/tmp/gpu-results}
RUN=${RUN:-/tmp/tolk-run}
mkdir -p "$RESULTS" "$RUN"
(cd "$SRC" && tar cf - --exclude=./.venv --exclude=./.git --exclude=./.gpukit --exclude=./.whl \
  --exclude=./models .) | (cd "$RUN" && tar xf -)
mkdir -p /tmp/models && ln -sfn /tmp/models "$RUN/models"
cd "$RUN"
export PYTHONPATH=$RUN/src${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
TOLK=("$PY" -m tolk)
M1=qwen-1b-shape
C1=configs/gpu-1b.yaml

log() { echo "$(date +%H:%M:%S) $*" | tee -a "$RESULTS/progress.log"; }

model() {  # model SHAPE: make models/SHAPE once
  [ -f "models/$1/config.json" ] || "${TOLK[@]}" make-test-model "models/$1" --shape "$1"
}

serve() {  # serve NAME COMMAND...: start a server on port 8000 in the background, wait ready
  local name=$1; shift
  "$@" > "$RESULTS/$name.log" 2>&1 &
  SERVER=$!
  until curl -sf 127.0.0.1:8000/ready > /dev/null; do
    kill -0 $SERVER 2>/dev/null || { log "$name died; see $name.log"; return 1; }
    sleep 1
  done
}

unserve() { kill -TERM "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; return 0; }

step_smoke() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$RESULTS/smoke/gpu.csv"
  "$PY" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' \
    > "$RESULTS/smoke/versions.txt"
  serve smoke/serve "${TOLK[@]}" serve --config $C1 --port 8000 || return 1
  curl -s -X POST 127.0.0.1:8000/translate -H 'content-type: application/json' \
    -d '{"text": "Hello, world!", "source_lang": "en", "target_lang": "de"}' \
    > "$RESULTS/smoke/translate.json"
  unserve
}

step_journey() {
  "${TOLK[@]}" bench journey --config $C1 --model $M1 --workloads uniform,variable \
    --concurrency 25 --duration 30 --warmup 5 --out "$RESULTS/journey"
}

step_overhead() {
  "${TOLK[@]}" bench overhead --config $C1 --model $M1 --workload variable \
    --concurrency 25 --requests 300 --rounds 4 --out "$RESULTS/overhead"
}

step_run-1b() {
  serve run-1b/serve "${TOLK[@]}" serve --config $C1 --port 8000 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload variable \
    --concurrency 1,2,4,8,16,25,32,64 --duration 20 --warmup 8 --timeline-interval 0.1 \
    --out "$RESULTS/run-1b"
  unserve
}

step_baseline-1b() {  # the case study's baseline under the same load, for the GPU picture
  serve baseline-1b/serve "$PY" -m tolk.bench.baselines.mp_server --config $C1 --model $M1 \
    --port 8000 --timeout 300 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload variable --concurrency 25 \
    --duration 30 --warmup 2 --timeline-interval 0.1 --out "$RESULTS/baseline-1b"
  unserve
  "${TOLK[@]}" bench gpu-compare --run "baseline (1 worker)=$RESULTS/baseline-1b" \
    --run "tolk (max_num_seqs 16)=$RESULTS/run-1b" --level 25 --out "$RESULTS/gpu-compare"
}

step_profile() {  # where a tolk server's CPU goes at concurrency 25 (py-spy, where carried)
  command -v py-spy > /dev/null || { log "py-spy not installed; skipped"; return 0; }
  serve profile/serve "${TOLK[@]}" serve --config $C1 --port 8000 || return 1
  py-spy record --pid $SERVER --rate 250 --duration 25 --format raw --nonblocking \
    --output "$RESULTS/profile/tolk-c25.txt" > "$RESULTS/profile/py-spy.log" 2>&1 &
  local spy=$!
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload variable --concurrency 25 \
    --duration 25 --warmup 10 --out "$RESULTS/profile/run"
  wait $spy
  unserve
}

step_versus() {
  "${TOLK[@]}" bench versus-vllm --config $C1 --model $M1 --workload variable \
    --concurrency 25 --requests 300 --rounds 2 --out "$RESULTS/versus"
}

step_tune() {
  "${TOLK[@]}" tune --config $C1 --model $M1 --concurrency 20 --workload variable \
    --slo-p95 2 --duration 15 --out "$RESULTS/tune"
}

step_run-7b() {
  model 7b || return 1
  serve run-7b/serve "${TOLK[@]}" serve --config configs/gpu-7b.yaml --port 8000 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload variable \
    --concurrency 1,4,16,25,64 --duration 20 --warmup 8 --timeline-interval 0.1 \
    --out "$RESULTS/run-7b"
  unserve
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(smoke journey overhead run-1b baseline-1b profile versus tune run-7b)
model 1b > "$RESULTS/make-1b.log" 2>&1 || { log "making the 1B model failed"; exit 1; }
for step in "${steps[@]}"; do
  mkdir -p "$RESULTS/$step"
  log "begin $step"
  begun=$(date +%s)
  if "step_$step" > "$RESULTS/$step/step.log" 2>&1; then
    log "done $step in $(( $(date +%s) - begun )) s"
  else
    log "FAILED $step after $(( $(date +%s) - begun )) s; see $step/step.log"
  fi
done
log "all done"
