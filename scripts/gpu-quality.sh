#!/usr/bin/env bash
# `tolk bench quality` on the GPU machine: the real Qwen2.5-Coder-0.5B-Instruct through tolk
# and through vLLM's own OpenAI server (the raw-`vllm serve` baseline), 400 FLORES-101
# sentences per pair (the whole scored part: lines 401-500 size tolk's budgets), the markup
# set, and the case-study article at each split. Writes under $RESULTS/quality and
# "all done" into $RESULTS/progress.log (scripts/gpu-wait.sh follows it).
#
# The GPU machine reaches no package index or hub, so the model travels as its verified GGUF
# in parts (GGUF_PARTS, default /tmp/gguf/part.*: split -b 56M of models/.gguf/<file> here,
# one device call per part) and `tolk fetch-model` checks the sha256 and converts it there.
# vLLM comes from the kit (../shared/gpu/README.md; its last `dl` line needs sacrebleu,
# portalocker, tabulate and colorama for this script).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
RESULTS=${RESULTS:-/tmp/gpu-results}
RUN=${RUN:-/tmp/tolk-run}
SENTENCES=${SENTENCES:-400}
# The FLORES data: ../shared/quality/flores101 does not travel to the device; carry a copy.
DATA=${DATA:-$SRC/../shared/quality/flores101}
mkdir -p "$RESULTS" "$RUN" /tmp/models/.gguf
(cd "$SRC" && tar cf - --exclude=./.venv --exclude=./.git --exclude=./.gpukit --exclude=./.whl \
  --exclude=./.ggufparts --exclude=./models .) | (cd "$RUN" && tar xf -)
ln -sfn /tmp/models "$RUN/models"
cd "$RUN"
export PYTHONPATH=$RUN/src${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
log() { echo "$(date +%H:%M:%S) $*" | tee -a "$RESULTS/progress.log"; }
GGUF=models/.gguf/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
[ -f "$GGUF" ] || cat ${GGUF_PARTS:-/tmp/gguf/part.*} > "$GGUF"
log "fetch-model (checks the sha256, converts)"
python3 -m tolk fetch-model > "$RESULTS/fetch-model.log" 2>&1 || { log "fetch-model failed"; log "all done"; exit 1; }
# Variants: tolk again with one setting changed each time (environment overrides of the
# config), on the first VARIANT_SENTENCES sentences and VARIANT_MARKUP markup units per pair,
# each compared with the default (paired bootstrap). VARIANTS picks them; the retry's parts
# (no-retry no-penalty no-instruction no-checks) were measured on 2026-11-23.
VARIANT_SENTENCES=${VARIANT_SENTENCES:-200}
VARIANT_MARKUP=${VARIANT_MARKUP:-50}
VARIANTS=${VARIANTS-examples0}
settings() {  # the overrides of a variant; NAME+NAME combines them
  local part
  for part in ${1//+/ }; do setting "$part"; done
}
setting() {
  case $1 in
    default) echo X=1 ;;
    no-retry) echo TOLK_MODELS__0__CHECKS__RETRY=false ;;
    no-penalty) echo TOLK_MODELS__0__CHECKS__RETRY_SAMPLING__REPETITION_PENALTY=1.0 ;;
    no-instruction) echo TOLK_MODELS__0__CHECKS__RETRY_INSTRUCTION=false ;;
    no-checks) echo TOLK_MODELS__0__CHECKS__ENABLED=false ;;
    guided) echo TOLK_MODELS__0__CHECKS__MARKUP_GUIDED=true ;;
    mbr*) echo "TOLK_MODELS__0__CANDIDATES__N=${1#mbr}" ;;
    examples*) echo "TOLK_MODELS__0__PROMPT_EXAMPLES=${1#examples}" ;;
  esac
}
variant() {  # variant NAME
  log "variant $1: $(settings "$1")"
  env $(settings "$1") python3 -m tolk bench quality --config configs/gpu-qwen2.5-coder-0.5b.yaml \
    --sentences "$VARIANT_SENTENCES" --markup --markup-sentences "$VARIANT_MARKUP" \
    --concurrency 64 --data "$DATA" --out "$RESULTS/variant-$1" \
    > "$RESULTS/variant-$1.log" 2>&1 || log "variant $1 failed"
}
[ -n "$VARIANTS" ] && variant default
for name in $VARIANTS; do
  variant "$name"
  python3 -m tolk bench quality-compare "$RESULTS/variant-default" "$RESULTS/variant-$name" \
    --out "$RESULTS/compare-$name" > "$RESULTS/compare-$name.log" 2>&1 || log "compare $name failed"
done
# The main run, after the variants: tolk (with MAIN_VARIANT's settings, if given) against the
# baseline. MAIN=0: the variants alone; VARIANTS="": the main run alone.
if [ "${MAIN:-1}" = 1 ]; then
  log "quality: tolk ${MAIN_VARIANT:-} and the OpenAI baseline, $SENTENCES sentences per pair, markup, documents"
  env $(settings "${MAIN_VARIANT:-default}") python3 -m tolk bench quality --config configs/gpu-qwen2.5-coder-0.5b.yaml \
    --openai-start models/qwen2.5-coder-0.5b-instruct --sentences "$SENTENCES" \
    --markup --markup-sentences 100 --documents --concurrency 64 --data "$DATA" \
    --out "$RESULTS/quality" > "$RESULTS/quality.log" 2>&1 || log "quality failed (see quality.log)"
fi
log "all done"
