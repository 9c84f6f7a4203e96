# make serve: set up if needed, fetch and convert the real model if missing (tolk fetch-model:
#             Qwen2.5-Coder-0.5B-Instruct, 1.3 GB, ~2 minutes once), serve on $(HOST):$(PORT).
# make test:  set up if needed, then ruff, the import rules (lint-imports), mypy and the
#             pytest suite but its `slow` tier (tests that start engines of their own: the
#             bench and tune commands, fleets, restarts); about 11 minutes on 2 cores.
# make test-all: the same with the slow tier: every test. CI runs this.

VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_MODEL := models/demo
REAL_MODEL := models/qwen2.5-coder-0.5b-instruct

# vLLM, torch and Hugging Face write caches, IPC sockets and compile artefacts outside the
# working tree by default; keep them in the project's .runtime/ instead.
RUNTIME := $(CURDIR)/.runtime
export TMPDIR := $(RUNTIME)/tmp
export VLLM_CACHE_ROOT := $(RUNTIME)/vllm
export XDG_CACHE_HOME := $(RUNTIME)/cache
export HF_HOME := $(RUNTIME)/huggingface
export TORCHINDUCTOR_CACHE_DIR := $(RUNTIME)/inductor
export VLLM_NO_USAGE_STATS := 1
export HF_HUB_OFFLINE ?= 1
# `tolk bench quality`'s sentences (FLORES-101, not shipped; `--data` or this variable names
# them): the shared data beside this checkout, for the tests that run the command.
export TOLK_QUALITY_DATA ?= $(abspath $(CURDIR)/../shared/quality/flores101)

.PHONY: setup serve test test-all lint typecheck pytest pytest-all demo-model real-model benchmarks clean

setup:
	@mkdir -p $(TMPDIR)
	@bash scripts/bootstrap.sh

demo-model: setup
	@[ -f $(DEMO_MODEL)/config.json ] || $(BIN)/tolk make-test-model $(DEMO_MODEL)

real-model: setup
	@[ -f $(REAL_MODEL)/tolk-model.json ] || $(BIN)/tolk fetch-model

# On a machine with an NVIDIA GPU (as scripts/bootstrap.sh decides: nvidia-smi lists one) the
# GPU config: a batch sized for documents by `tolk tune --traffic documents`.
SERVE_CONFIG ?= $(shell nvidia-smi -L 2>/dev/null | grep -q GPU \
	&& echo configs/gpu-qwen2.5-coder-0.5b.yaml || echo configs/qwen2.5-coder-0.5b.yaml)

serve: real-model
	$(BIN)/tolk serve --config $(SERVE_CONFIG) --host $(HOST) --port $(PORT)

lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest -m "not slow"

pytest-all: setup
	$(BIN)/pytest

test: lint typecheck pytest

test-all: lint typecheck pytest-all

benchmarks: demo-model
	bash scripts/run-benchmarks.sh

clean:
	rm -rf .runtime models .pytest_cache .mypy_cache .ruff_cache
