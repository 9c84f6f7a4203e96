#!/usr/bin/env bash
# tolk's edge alone, two checkouts side by side (docs/benchmarks.md §14): a server over the
# stand-in engine (tests/support/standin_server.py: the engine answers at once) with the shipped
# real-model config, at 256 clients on FLORES sentences, alternating, two rounds each.
#   bash scripts/edge-ab.sh OLD_SRC NEW_SRC FLORES_JSONL OUT
# OLD_SRC/NEW_SRC: the `src` of two worktrees; FLORES_JSONL: the workload of
# scripts/gpu-benchmarks.sh's real_model (flores-400x6.jsonl).
set -euo pipefail
old=$1 new=$2 flores=$3 out=$4
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
"$here/.venv/bin/python" - "$here" "$out/shipped.yaml" <<'PY'
import sys, yaml
here, path = sys.argv[1:]
config = yaml.safe_load(open(f"{here}/configs/gpu-qwen2.5-coder-0.5b.yaml"))
config["server"]["port"] = 8947
config["models"][0]["path"] = f"{here}/models/qwen2.5-coder-0.5b-instruct"
yaml.safe_dump(config, open(path, "w"))
PY
for round in 1 2; do
  for side in old new; do
    src=$new; [ $side = old ] && src=$old
    PYTHONPATH=$src "$here/.venv/bin/python" "$here/tests/support/standin_server.py" "$out/shipped.yaml" \
      > "$out/server-$side-$round.log" 2>&1 &
    pid=$!
    for _ in $(seq 120); do curl -sf 127.0.0.1:8947/ready > /dev/null && break; sleep 1; done
    "$here/.venv/bin/tolk" bench run --url http://127.0.0.1:8947 --workload "$flores" \
      --concurrency 256 --requests 1200 --warmup 100 --out "$out/$side-$round" \
      > "$out/bench-$side-$round.log" 2>&1
    kill $pid; wait $pid || true
    echo "$side round $round: $(grep -E '^\| 256' "$out/$side-$round/report.md")"
  done
done
