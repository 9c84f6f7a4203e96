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
pack() {  # into a temporary name first: a kill mid-write leaves the last whole pack
  # (tar's 1: a file changed as it was read, the bench still writing: packed all the same)
  local rc=0
  tar czf "$OUT/.results.tgz" --warning=no-file-changed --exclude='*.safetensors' \
    -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")" || rc=$?
  [ "$rc" -le 1 ] && mv "$OUT/.results.tgz" "$OUT/results.tgz"
}
t0=$(date +%s) packed=$(date +%s)
while [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do
  tail -n 1 "$RESULTS/progress.log" | grep -q "all done" && break
  # Packed every minute too: the device may stop this call before $limit (the session's
  # device time can run out), and what is under $OUT then still comes back.
  if [ $(( $(date +%s) - packed )) -ge 60 ]; then pack; packed=$(date +%s); fi
  sleep 5
done
cat "$RESULTS/progress.log"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
pack
ls -la "$OUT"
