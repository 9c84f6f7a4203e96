#!/usr/bin/env bash
# On the GPU machine: follow scripts/gpu-benchmarks.sh running in the background for up to
# $1 seconds (or until it is done), then pack what it has written into $OUT/results.tgz.
# Returns at once where nothing was started (no progress.log: the launch did not run, or
# the device lent a fresh machine), so a batch of wait calls does not spend its budget on
# an empty machine; "done" is the log's last line saying so (a log kept from an earlier run
# on the same machine has it further up).
RESULTS=${RESULTS:-/tmp/gpu-results}
limit=${1:-540}
[ -f "$RESULTS/progress.log" ] || { echo "nothing running here: no $RESULTS/progress.log"; exit 3; }
t0=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
  tail -n 1 "$RESULTS/progress.log" | grep -q "all done" && break
  sleep 5
done
cat "$RESULTS/progress.log"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tar czf "$OUT/results.tgz" --exclude='*.safetensors' -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")"
ls -la "$OUT"
