#!/usr/bin/env bash
# The GPU figures of docs/benchmarks.md, on the project's H100 (or any NVIDIA machine with
# vLLM importable): tolk's own commands, one step after another, each writing JSON, markdown
# and charts under $RESULTS/<step>. Steps (default: all, in this order):
#   smoke journey overhead run-1b baseline-1b profile versus tune run-7b
# and the documents steps (issue 25; not in the default list):
#   tune-docs documents-1b mixed-1b documents-7b (documents-7b-16 edge-1b: its follow-ups)
# and, on a machine of two GPUs (issues 26 and 40; not in the default list):
#   scale-one scale-fleet scale-vllm-dp scale-pairs scale-kill
# and the same with the real 0.5B model as shipped, on FLORES sentences at saturation
# (256 clients; the GGUF at models/.gguf, FLORES at $DATA; see real_model below):
#   real-one real-fleet real-vllm-dp (and real-versus: one tolk against one vLLM server;
#   real-versus-checks-off: the same with tolk's checks off, both engines sent the same
#   requests; real-quality: `tolk bench quality` as shipped and with each feature off against vLLM's
#   own server with the plain prompt, one GPU: issue 36 ($QUALITY_VARIANTS, $QUALITY_ROUNDS;
#   real-quality-no-ne: the same without en-ne); real-versus-pacing: checks off at
#   three turn budgets of tolk.translation.pacing; real-pacing-ab: two of them side by side;
#   real-three-way: vLLM's server, tolk and tolk's engine without HTTP, the same requests;
#   real-profile-256: py-spy on tolk at 256 clients, checks off; real-loop-ab: tolk at
#   $OLD_SRC against this tree, checks off, alternating; real-quality-short: real-quality's
#   sentences only, 200 a pair, unprofiled, for a lease with little time left)
# Every step samples the GPUs' utilisation (nvidia-smi, 500 ms) into <step>/gpu-util.csv.
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
# The multi-GPU machines keep NVLink multicast off (the device tool's KINDS.md): in every
# process started from here too.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
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

tuned() {  # tuned CONFIG OUT: CONFIG with tune-docs' recommendation merged into its model
  "$PY" - "$1" "$RESULTS/tune-docs/recommended.yaml" "$2" <<'PY'
import sys, yaml
config, rec, out = sys.argv[1:]
data = yaml.safe_load(open(config))
data["models"][0]["engine"].update(yaml.safe_load(open(rec))["models"][0]["engine"])
data["models"][0]["engine"].pop("kv_cache_memory_bytes", None)  # GPU: gpu_memory_utilization
yaml.safe_dump(data, open(out, "w"), sort_keys=False)
PY
}

chosen() {  # the max_num_seqs tune-docs chose
  "$PY" -c "import json; print(json.load(open('$RESULTS/tune-docs/tune.json'))['choice']['max_num_seqs'])"
}

step_tune-docs() {  # documents traffic: the batch that serves 8 articles at once, upward
  "${TOLK[@]}" tune --config $C1 --model $M1 --traffic documents --concurrency 8 \
    --requests 16 --warmup 2 --candidates 16,32,64,128,256 --batched-tokens 4096,16384 \
    --out "$RESULTS/tune-docs"
}

step_documents-1b() {  # every article idle (split vs floor vs none) and loaded, as tuned
  tuned $C1 configs/tuned-1b.yaml || return 1
  cp configs/tuned-1b.yaml "$RESULTS/documents-1b/"
  serve documents-1b/serve "${TOLK[@]}" serve --config configs/tuned-1b.yaml --port 8000 \
    || return 1
  "${TOLK[@]}" bench documents --url http://127.0.0.1:8000 --concurrency 8 --documents 24 \
    --tokenizer models/1b --out "$RESULTS/documents-1b"
  unserve
}

step_mixed-1b() {  # sentences at 16 beside 4 documents, at the tuned batch, both policies
  tuned $C1 configs/tuned-1b.yaml || return 1
  "${TOLK[@]}" tune --config configs/tuned-1b.yaml --model $M1 --traffic mixed \
    --concurrency 16 --document-concurrency 4 --workload variable --duration 15 --warmup 8 \
    --candidates "$(chosen)" --batched-tokens "$(chosen_tokens)" --out "$RESULTS/mixed-1b"
}

chosen_tokens() {
  "$PY" -c "import json; print(json.load(open('$RESULTS/tune-docs/tune.json'))['choice']['max_num_batched_tokens'])"
}

documents_at() {  # documents_at CONFIG SEQS TOKENS OUT DOCS: bench documents at that batch
  local config=$1 seqs=$2 tokens=$3 out=$4 docs=$5
  "$PY" - "$config" "$seqs" "$tokens" configs/documents-at.yaml <<'PY'
import sys, yaml
config, seqs, tokens, out = sys.argv[1:]
data = yaml.safe_load(open(config))
engine = data["models"][0]["engine"]
# a queue that admits 8 articles whole, at every batch size alike
engine.update(max_num_seqs=int(seqs), max_num_batched_tokens=int(tokens), max_waiting=2048)
yaml.safe_dump(data, open(out, "w"), sort_keys=False)
PY
  mkdir -p "$RESULTS/$out"
  cp configs/documents-at.yaml "$RESULTS/$out/config.yaml"
  serve "$out/serve" "${TOLK[@]}" serve --config configs/documents-at.yaml --port 8000 || return 1
  "${TOLK[@]}" bench documents --url http://127.0.0.1:8000 --concurrency 8 --documents "$docs" \
    --tokenizer "$(dirname "$config")/$(yq_path "$config")" --out "$RESULTS/$out"
  unserve
}

yq_path() {  # the model path a config names (relative to the config's directory)
  "$PY" -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['models'][0]['path'])" "$1"
}

step_documents-7b() {  # the 7B shape: the 1B's tuned batch, then the case study's 16
  model 7b || return 1
  documents_at configs/gpu-7b.yaml "$(chosen)" "$(chosen_tokens)" "documents-7b/seqs-$(chosen)" 16 \
    || return 1
  documents_at configs/gpu-7b.yaml 16 8192 documents-7b/seqs-16 16
}

step_documents-7b-16() {  # the 7B shape at the case study's 16 alone
  model 7b || return 1
  documents_at configs/gpu-7b.yaml 16 8192 documents-7b/seqs-16 16
}

step_edge-1b() {  # past the tuned grid's edge: a wider batch, and a prefill of one step
  documents_at $C1 512 8192 edge-1b/seqs-512 24 || return 1
  documents_at $C1 256 32768 edge-1b/tokens-32768 24
}

fleet_up() {  # fleet_up NAME ARGS...: `tolk fleet` on :8080 in the background, wait ready
  local name=$1; shift
  "${TOLK[@]}" fleet "$@" --port 8080 --prometheus-port 0 --workdir "$RESULTS/$name/run" \
    > "$RESULTS/$name/fleet.log" 2>&1 &
  FLEET=$!
  until grep -q "fleet ready" "$RESULTS/$name/fleet.log"; do
    kill -0 $FLEET 2>/dev/null || { log "$name: the fleet died; see $name/fleet.log"; return 1; }
    sleep 1
  done
}

fleet_down() { kill -INT "$FLEET" 2>/dev/null; wait "$FLEET" 2>/dev/null; return 0; }

SCALE_LOAD=(--workload variable --concurrency 32,64,128 --duration ${SCALE_SECONDS:-20} --warmup 16)

step_scale-one() {  # the baseline: one server on one GPU
  CUDA_VISIBLE_DEVICES=0 serve scale-one/serve "${TOLK[@]}" serve --config $C1 --port 8000 \
    || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 "${SCALE_LOAD[@]}" --out "$RESULTS/scale-one"
  unserve
}

step_scale-fleet() {  # two servers, one GPU each, behind the proxy (target: 1.9x scale-one)
  fleet_up scale-fleet -c $C1 --servers 2 --gpus 0,1 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8080 "${SCALE_LOAD[@]}" \
    --out "$RESULTS/scale-fleet"
  fleet_down
}

step_scale-vllm-dp() {  # the peer: vLLM's own data parallelism on the same two GPUs
  "${TOLK[@]}" bench versus-vllm --config $C1 --model $M1 --workload variable \
    --concurrency 64 --requests 600 --rounds 2 --warmup 32 --data-parallel 2 \
    --out "$RESULTS/scale-vllm-dp"
}

step_scale-pairs() {  # two servers serving different pairs: the proxy routes by pair
  for target in de fr; do
    "$PY" - $C1 $target configs/pair-$target.yaml <<'PY'
import sys, yaml
config, target, out = sys.argv[1:]
data = yaml.safe_load(open(config))
data["models"][0]["languages"] = ["en", target]
yaml.safe_dump(data, open(out, "w"), sort_keys=False)
PY
  done
  fleet_up scale-pairs -c configs/pair-de.yaml -c configs/pair-fr.yaml --gpus 0,1 || return 1
  for target in de fr; do
    "${TOLK[@]}" bench run --url http://127.0.0.1:8080 --workload variable --target "$target" \
      --concurrency 32 --duration 20 --warmup 8 --out "$RESULTS/scale-pairs/en-$target"
  done
  curl -s 127.0.0.1:8080/metrics | grep '^tolk_proxy_\(upstream_\)\?requests_total' > "$RESULTS/scale-pairs/proxy.txt"
  fleet_down
}

step_scale-kill() {  # one server killed mid-load: every request still answered
  # Servers and proxy by hand: `tolk fleet` stops everything when one of its members dies.
  local pids=()
  for gpu in 0 1; do
    CUDA_VISIBLE_DEVICES=$gpu "${TOLK[@]}" serve --config $C1 --port 810$gpu \
      > "$RESULTS/scale-kill/server-$gpu.log" 2>&1 &
    pids+=($!)
  done
  for gpu in 0 1; do
    until curl -sf 127.0.0.1:810$gpu/ready > /dev/null; do sleep 1; done
  done
  "${TOLK[@]}" proxy --upstream http://127.0.0.1:8100 --upstream http://127.0.0.1:8101 \
    --port 8080 > "$RESULTS/scale-kill/proxy.log" 2>&1 &
  local proxy=$!
  until curl -sf 127.0.0.1:8080/ready > /dev/null; do sleep 1; done
  ( sleep 20; kill -9 "${pids[1]}" ) &  # its engine follows (parent-death signal)
  "${TOLK[@]}" bench run --url http://127.0.0.1:8080 --workload variable --concurrency 64 \
    --duration 45 --warmup 16 --out "$RESULTS/scale-kill"
  kill -TERM $proxy "${pids[0]}" 2>/dev/null; wait 2>/dev/null; return 0
}

# The real model as shipped (configs/gpu-qwen2.5-coder-0.5b.yaml: two examples in the prompt,
# output checks, retries) on the FLORES-101 sentences that `tolk bench quality` scores (lines
# 1-400 of ../shared/quality/flores101, which does not travel to the device: carry a copy and
# set DATA), six pairs, each sentence once per level, at 256 clients: the saturation of
# ../shared/research/real-speed-h100.md.
REAL_CONFIG=configs/gpu-qwen2.5-coder-0.5b.yaml
REAL_NAME=qwen2.5-coder-0.5b
DATA=${DATA:-$SRC/../shared/quality/flores101}
FLORES=$RUN/flores-400x6.jsonl
REAL_LOAD=(--workload "$FLORES" --concurrency 256 --requests 2400 --warmup 256)

real_model() {  # the converted model and the workload, once (the GGUF at models/.gguf)
  [ -f models/qwen2.5-coder-0.5b-instruct/tolk-model.json ] \
    || "${TOLK[@]}" fetch-model > "$RESULTS/fetch-model.log" 2>&1 || return 1
  flores_workload 400 "$FLORES"
}

checks_off_config() {  # $RUN/configs/gpu-checks-off.yaml: the real model's config, checks off
  "$PY" - "$REAL_CONFIG" "$RUN/configs/gpu-checks-off.yaml" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for model in config["models"]:
    model.setdefault("checks", {})["enabled"] = False
yaml.safe_dump(config, open(sys.argv[2], "w"))
PY
}

flores_workload() {  # the first $1 FLORES lines of each pair, interleaved, into $2 (once)
  [ -f "$2" ] || "$PY" - "$DATA" "$2" "$1" <<'PY'
import json, sys
from pathlib import Path
data, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
files = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa", "zh": "cmn_Hans", "ne": "npi"}
lines = {tag: (data / f"{name}.txt").read_text(encoding="utf-8").splitlines()[:n]
         for tag, name in files.items()}
pairs = [("en", "de"), ("en", "fr"), ("en", "es"), ("en", "zh"), ("en", "ne"), ("de", "en")]
with out.open("w", encoding="utf-8") as f:
    for i in range(min(len(v) for v in lines.values())):  # pairs interleaved, as mixed traffic
        for src, tgt in pairs:
            f.write(json.dumps({"text": lines[src][i], "source_lang": src, "target_lang": tgt},
                               ensure_ascii=False) + "\n")
PY
}

step_real-one() {  # one server on one GPU; then the same load again under py-spy, if carried
  real_model || return 1
  CUDA_VISIBLE_DEVICES=0 serve real-one/serve "${TOLK[@]}" serve --config $REAL_CONFIG \
    --port 8000 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 "${REAL_LOAD[@]}" \
    --timeline-interval 0.25 --out "$RESULTS/real-one"
  curl -s 127.0.0.1:8000/metrics > "$RESULTS/real-one/metrics.txt"
  if command -v py-spy > /dev/null; then
    py-spy record --pid $SERVER --rate 100 --duration 20 --format raw --nonblocking \
      --output "$RESULTS/real-one/py-spy.txt" > "$RESULTS/real-one/py-spy.log" 2>&1 &
    local spy=$!
    "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload "$FLORES" --concurrency 256 \
      --duration 22 --warmup 0 --out "$RESULTS/real-one/profiled"
    wait $spy
  fi
  unserve
}

step_real-fleet() {  # two servers, one GPU each, behind the proxy
  real_model || return 1
  fleet_up real-fleet -c $REAL_CONFIG --servers 2 --gpus 0,1 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8080 "${REAL_LOAD[@]}" \
    --timeline-interval 0.25 --out "$RESULTS/real-fleet"
  curl -s 127.0.0.1:8080/metrics > "$RESULTS/real-fleet/proxy-metrics.txt"
  fleet_down
}

step_real-vllm-dp() {  # vLLM's DP 2 fed tolk's own prompts, against tolk's fleet, alternating
  real_model || return 1
  "${TOLK[@]}" bench versus-vllm --config $REAL_CONFIG --model $REAL_NAME --workload "$FLORES" \
    --concurrency 256 --requests 2400 --rounds 2 --warmup 256 --data-parallel 2 \
    --out "$RESULTS/real-vllm-dp"
}

step_real-versus() {  # one tolk server against one vLLM server, tolk's prompts, one GPU
  real_model || return 1
  CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" bench versus-vllm --config $REAL_CONFIG --model $REAL_NAME \
    --workload "$FLORES" --concurrency 256 --requests 2400 --rounds 2 --warmup 256 \
    --out "$RESULTS/real-versus"
}

step_real-versus-checks-off() {  # the same, tolk's checks off: both engines get the same requests
  # (no retries, the examples always shown), so their output tokens a second compare the
  # engine under tolk with the engine under vLLM's server, request for request.
  real_model || return 1
  checks_off_config
  CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" bench versus-vllm --config "$RUN/configs/gpu-checks-off.yaml" \
    --model $REAL_NAME --workload "$FLORES" --concurrency 256 --requests 2400 --rounds 2 \
    --warmup 256 --out "$RESULTS/real-versus-checks-off"
}

step_real-versus-pacing() {  # issue 36: the same requests (checks off) at three turn budgets
  # (server.turn_budget_ms: 0 = one piece a pass, as before; 5 = the default; 1000 = a burst
  # taken in one pass), each against vLLM's server in alternating rounds.
  real_model || return 1
  flores_workload 500 "$RUN/flores-500x6.jsonl"  # 3,000 sentences: none repeats in a round
  local budget
  for budget in ${PACING_BUDGETS:-0 5 1000}; do
    "$PY" - "$REAL_CONFIG" "$RUN/configs/gpu-pacing-$budget.yaml" "$budget" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for model in config["models"]:
    model.setdefault("checks", {})["enabled"] = False
config.setdefault("server", {})["turn_budget_ms"] = float(sys.argv[3])
yaml.safe_dump(config, open(sys.argv[2], "w"))
PY
    log "real-versus-pacing: turn budget $budget ms"
    CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" bench versus-vllm --config "$RUN/configs/gpu-pacing-$budget.yaml" \
      --model $REAL_NAME --workload "$RUN/flores-500x6.jsonl" --concurrency 256 --requests 2700 \
      --rounds 2 --warmup 256 --out "$RESULTS/real-versus-pacing/budget-$budget" || return 1
  done
}

step_real-three-way() {  # issue 36: vLLM's server, tolk and tolk's engine awaited directly
  # (no HTTP, no service), all up at once on one GPU, tolk's checks off so all three get the
  # same engine requests; five alternating rounds at each of $THREE_WAY_CONCURRENCY clients.
  real_model || return 1
  flores_workload 500 "$RUN/flores-500x6.jsonl"
  checks_off_config
  local clients
  for clients in ${THREE_WAY_CONCURRENCY:-256 96}; do
    log "real-three-way: $clients clients"
    CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" bench versus-vllm --config "$RUN/configs/gpu-checks-off.yaml" \
      --model $REAL_NAME --workload "$RUN/flores-500x6.jsonl" --systems vllm,tolk,direct \
      --concurrency "$clients" --requests 2700 --rounds "${THREE_WAY_ROUNDS:-5}" --warmup 256 \
      --out "$RESULTS/real-three-way/clients-$clients" || return 1
  done
}

step_real-profile-256() {  # issue 36: where tolk's own time goes at 256 clients on the same
  # requests as vLLM's (checks off): py-spy on the server and its engine core while `bench run`
  # loads it, once busy-only (no --idle: each thread's share of a core) and once with --idle
  # (the event loop's wall time, waits included).
  real_model || return 1
  flores_workload 500 "$RUN/flores-500x6.jsonl"
  checks_off_config
  local out="$RESULTS/real-profile-256" bench
  mkdir -p "$out"
  CUDA_VISIBLE_DEVICES=0 serve tolk-profiled "${TOLK[@]}" serve --config "$RUN/configs/gpu-checks-off.yaml" \
    --port 8000 || return 1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload "$RUN/flores-500x6.jsonl" \
    --concurrency 256 --requests 2700 --warmup 256 --out "$out/warm" > /dev/null 2>&1
  "${TOLK[@]}" bench run --url http://127.0.0.1:8000 --workload "$RUN/flores-500x6.jsonl" \
    --concurrency 256 --requests 16200 --warmup 256 --out "$out/run" > /dev/null 2>&1 &
  bench=$!
  sleep 10
  py-spy record --pid "$SERVER" --subprocesses --threads --rate 100 --format raw --duration 15 \
    --nonblocking --output "$out/profile-busy.txt" > "$out/py-spy-busy.log" 2>&1
  py-spy record --pid "$SERVER" --subprocesses --threads --idle --rate 100 --format raw \
    --duration 10 --nonblocking --output "$out/profile-idle.txt" > "$out/py-spy-idle.log" 2>&1
  wait "$bench"
  gzip -f "$out"/profile-*.txt
  unserve
}

step_real-loop-ab() {  # issue 36: tolk before and after a change on one GPU, checks off: the
  # older tree at $OLD_SRC (a git archive of the earlier commit) and this one, all up at once
  # ($LOOP_AB: the servers, in each round's order, default "old new"; a name starting with
  # "old" runs $OLD_SRC, so "old new old2" adds an A/A pair to show the noise), each round the
  # same 2,700 FLORES sentences at 256 clients, $LOOP_AB_ROUNDS rounds (default 5).
  real_model || return 1
  [ -d "${OLD_SRC:-}/src/tolk" ] || { log "real-loop-ab: OLD_SRC has no src/tolk"; return 1; }
  flores_workload 500 "$RUN/flores-500x6.jsonl"
  checks_off_config
  local servers=(${LOOP_AB:-old new}) out="$RESULTS/real-loop-ab" which round i pids=()
  "$PY" - "$RUN/configs/gpu-checks-off.yaml" "$RUN/configs/gpu-ab.yaml" "${#servers[@]}" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for model in config["models"]:
    model["engine"]["gpu_memory_utilization"] = round(0.85 / int(sys.argv[3]), 2)
yaml.safe_dump(config, open(sys.argv[2], "w"))
PY
  mkdir -p "$out"
  for i in "${!servers[@]}"; do
    which=${servers[$i]}
    if [[ $which == old* ]]; then
      PYTHONPATH="$OLD_SRC/src:${PYTHONPATH#"$RUN/src:"}" CUDA_VISIBLE_DEVICES=0 "$PY" -m tolk serve \
        --config "$RUN/configs/gpu-ab.yaml" --port $((8101 + i)) > "$out/serve-$which.log" 2>&1 &
    else
      CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" serve --config "$RUN/configs/gpu-ab.yaml" \
        --port $((8101 + i)) > "$out/serve-$which.log" 2>&1 &
    fi
    pids+=($!)
    until curl -sf 127.0.0.1:$((8101 + i))/ready > /dev/null; do
      kill -0 "${pids[-1]}" 2>/dev/null || { log "tolk ($which) died"; return 1; }
      sleep 1
    done
  done
  for round in $(seq 1 "${LOOP_AB_ROUNDS:-5}"); do
    for i in "${!servers[@]}"; do
      which=${servers[$i]}
      log "real-loop-ab: round $round, $which"
      "${TOLK[@]}" bench run --url http://127.0.0.1:$((8101 + i)) \
        --workload "$RUN/flores-500x6.jsonl" --concurrency 256 --requests 2700 --warmup 256 \
        --out "$out/round-$round-$which" > /dev/null 2>&1
    done
  done
  kill -TERM "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; return 0
}

step_real-pacing-ab() {  # issue 36: two tolk servers on one GPU, checks off, turn budgets 0 and
  # 5 ms (tolk.translation.pacing), started one after the other, then loaded in turns (three
  # rounds each, alternating) with the same 2,700 FLORES sentences at 256 clients.
  real_model || return 1
  flores_workload 500 "$RUN/flores-500x6.jsonl"
  local budget round pids=()
  for budget in ${PACING_BUDGETS:-0 5}; do
    "$PY" - "$REAL_CONFIG" "$RUN/configs/gpu-ab-$budget.yaml" "$budget" <<'PY'
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for model in config["models"]:
    model.setdefault("checks", {})["enabled"] = False
    model["engine"]["gpu_memory_utilization"] = 0.3
config.setdefault("server", {})["turn_budget_ms"] = float(sys.argv[3])
yaml.safe_dump(config, open(sys.argv[2], "w"))
PY
    CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" serve --config "$RUN/configs/gpu-ab-$budget.yaml" \
      --port $((8100 + budget)) > "$RESULTS/real-pacing-ab/serve-$budget.log" 2>&1 &
    pids+=($!)
    until curl -sf 127.0.0.1:$((8100 + budget))/ready > /dev/null; do
      kill -0 "${pids[-1]}" 2>/dev/null || { log "tolk (budget $budget) died"; return 1; }
      sleep 1
    done
  done
  for round in 1 2 3; do
    for budget in ${PACING_BUDGETS:-0 5}; do
      log "real-pacing-ab: round $round, budget $budget ms"
      "${TOLK[@]}" bench run --url http://127.0.0.1:$((8100 + budget)) \
        --workload "$RUN/flores-500x6.jsonl" --concurrency 256 --requests 2700 --warmup 256 \
        --out "$RESULTS/real-pacing-ab/round-$round-budget-$budget" > /dev/null 2>&1
    done
  done
  kill -TERM "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; return 0
}

step_real-quality() {  # issue 36: the product against the raw server, as a user compares them
  # tolk as shipped and with each feature off (one server at a time), each alternating over
  # two rounds with vLLM's own OpenAI server on the same model and GPU, sent the plain
  # prompt: chrF++ beside requests/s, output tokens/s, GPU busy and the engine's batch.
  # With py-spy carried: each server profiled in its first pass (--profile), and every 10 s
  # the machine's busiest threads (top -H), to see whether anything competes for the cores.
  # ($QUALITY_SENTENCES a pair, 400; QUALITY_MARKUP= leaves the markup units out,
  # QUALITY_PROFILE= the profiles.)
  real_model || return 1
  local profiling=() markup=() top_loop
  if [ -n "${QUALITY_PROFILE-1}" ] && command -v py-spy > /dev/null; then profiling=(--profile); fi
  if [ -n "${QUALITY_MARKUP-1}" ]; then markup=(--markup); fi
  local out="$RESULTS/${QUALITY_OUT:-real-quality}" pairs=()
  if [ -n "${QUALITY_PAIRS:-}" ]; then pairs=(--pairs "$QUALITY_PAIRS"); fi
  ( while true; do date +%T; top -b -H -n 1 -w 400 | head -45; sleep 10; done ) \
    > "$out/top-threads.txt" 2>&1 &
  top_loop=$!
  CUDA_VISIBLE_DEVICES=0 "${TOLK[@]}" bench quality --config $REAL_CONFIG \
    --openai-start models/qwen2.5-coder-0.5b-instruct --data "$DATA" \
    --sentences "${QUALITY_SENTENCES:-400}" "${markup[@]}" --concurrency 256 \
    --rounds "${QUALITY_ROUNDS:-2}" "${pairs[@]}" \
    --variants "${QUALITY_VARIANTS-examples-off,checks-off,retry-off}" "${profiling[@]}" \
    --out "$out"
  local rc=$?
  kill $top_loop 2>/dev/null; wait $top_loop 2>/dev/null; return $rc
}

step_real-quality-short() {  # real-quality's sentences only (200 a pair, no markup, no
  # profiles): a variant (the shipped config without gathering unless QUALITY_VARIANTS says)
  # against the shipped server and vLLM's, in about 6 minutes
  QUALITY_OUT=real-quality-short QUALITY_SENTENCES=200 QUALITY_MARKUP= QUALITY_PROFILE= \
    QUALITY_VARIANTS=${QUALITY_VARIANTS-gather-off} step_real-quality
}

step_real-quality-no-ne() {  # issue 36: the same without en-ne (where tolk writes Nepali and
  # the raw server mostly echoes English: the pair's cost apart from the others')
  QUALITY_OUT=real-quality-no-ne QUALITY_PAIRS=en-de,en-fr,en-es,en-zh,de-en \
    QUALITY_VARIANTS=${NO_NE_VARIANTS-} step_real-quality
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(smoke journey overhead run-1b baseline-1b profile versus tune run-7b)
[ -n "${SKIP_1B:-}" ] || model 1b > "$RESULTS/make-1b.log" 2>&1 \
  || { log "making the 1B model failed"; exit 1; }
for step in "${steps[@]}"; do
  mkdir -p "$RESULTS/$step"
  log "begin $step"
  begun=$(date +%s)
  sampler=
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv,noheader \
      -lms 500 > "$RESULTS/$step/gpu-util.csv" 2>/dev/null &
    sampler=$!
  fi
  if "step_$step" > "$RESULTS/$step/step.log" 2>&1; then
    log "done $step in $(( $(date +%s) - begun )) s"
  else
    log "FAILED $step after $(( $(date +%s) - begun )) s; see $step/step.log"
  fi
  [ -z "$sampler" ] || { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }
done
log "all done"
