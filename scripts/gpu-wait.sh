#!/usr/bin/env bash
# On the GPU machine: follow scripts/gpu-benchmarks.sh running in the background for up to
# $1 seconds (or until it is done), then pack what it has written into $OUT/results.tgz.
RESULTS=${RESULTS:-/tmp/gpu-results}
limit=${1:-540}
t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
  grep -q "all done" "$RESULTS/progress.log" 2>/dev/null && break
  sleep 5
done
cat "$RESULTS/progress.log"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tar czf "$OUT/results.tgz" --exclude='*.safetensors' -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
ls -la "$OUT"
