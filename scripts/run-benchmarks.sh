#!/usr/bin/env bash
# Reproduces the figures in docs/benchmarks.md on this machine (about 60 minutes on 2 cores).
# Run through make so that caches stay in .runtime/: `make benchmarks`.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-docs/benchmarks}
TOLK=.venv/bin/tolk
mkdir -p "$OUT"

# 1. The server under load: the demo config (max_num_seqs 16), variable-length inputs.
#    It has a key store (for section 8), with one key whose rate and quota never bind.
PORT=8300
rm -f "$OUT/keys.db"*
KEY=$($TOLK keys add bench --rate 100000/second --quota 1000000000 --db "$OUT/keys.db")
TOLK_ACCESS__DB="$OUT/keys.db" $TOLK serve --config configs/demo.yaml --port $PORT \
  > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT
until curl -sf "127.0.0.1:$PORT/ready" > /dev/null; do
  kill -0 $SERVER || { echo "server failed; see $OUT/serve.log"; exit 1; }
  sleep 1
done
grep -o "tolk ready: .*" "$OUT/serve.log"
$TOLK bench run --url "http://127.0.0.1:$PORT" --workload variable \
  --concurrency 1,8,16,25,64 --requests 128 --warmup 5 --out "$OUT/run-variable"
# 7. Whole documents on the same server (section 7).
$TOLK bench documents --url "http://127.0.0.1:$PORT" --concurrency 8 --documents 32 \
  --out "$OUT/documents"
# 8. The DeepL and LibreTranslate APIs against tolk's own, without and with a key.
$TOLK bench apis --url "http://127.0.0.1:$PORT" --concurrency 16 --requests 100 --rounds 4 \
  --out "$OUT/apis"
$TOLK bench apis --url "http://127.0.0.1:$PORT" --concurrency 16 --requests 100 --rounds 4 \
  --key "$KEY" --out "$OUT/apis-keys"
kill -TERM $SERVER; wait $SERVER || true
trap - EXIT

# 2. The case study's journey at concurrency 25.
$TOLK bench journey --config configs/demo.yaml --model demo --workloads uniform,variable \
  --concurrency 25 --requests 60 --warmup 5 --out "$OUT/journey"

# 3. HTTP vs direct AsyncLLM.
$TOLK bench overhead --config configs/demo.yaml --model demo --workload variable \
  --concurrency 25 --requests 200 --rounds 2 --out "$OUT/overhead"

# 4. tolk tune on the variable workload at concurrency 20, with the full grid for comparison.
$TOLK tune --config configs/demo.yaml --model demo --concurrency 20 --workload variable \
  --slo-p95 10 --compare-full --out "$OUT/tune"

# 5. The proxy: throughput and scale with stand-in upstreams of fixed capacity (closed loop),
#    latency added under Poisson arrivals, then two real demo-model servers.
$TOLK bench proxy --standin --capacity 8 --hold 0.05 --concurrency 32 --requests 2000 \
  --rounds 2 --out "$OUT/proxy-standin"
$TOLK bench proxy --standin --capacity 8 --hold 0.2 --concurrency 32 --requests 800 \
  --rounds 2 --warmup 32 --out "$OUT/proxy-scale"
$TOLK bench proxy --standin --capacity 64 --hold 0.05 --rate 100 --requests 1500 \
  --rounds 2 --warmup 20 --out "$OUT/proxy-latency"
$TOLK bench proxy --no-standin --config configs/demo.yaml --model demo --workload variable \
  --concurrency 25 --requests 100 --rounds 2 --warmup 5 --out "$OUT/proxy-real"
