#!/usr/bin/env bash
# deepl-python's own test suite, in its real-server mode, against a tolk server started here
# on the demo model with API keys required (the drop-in check of issue 23, repeatable).
#
#   scripts/deepl-suite.sh DEEPL_PYTHON_CHECKOUT [pytest arguments]
#
# DEEPL_PYTHON_CHECKOUT: a clone of https://github.com/DeepLcom/deepl-python at the tag whose
# tests to run (v1.30.0 measured in docs/benchmarks.md); its tests/ are run with the deepl
# release of the same version, in a virtual environment of their own (.runtime/deepl-suite:
# the suite's conftest needs pydantic 1). The server serves every language DeepL's tests use
# (the random model "translates" them all into token salad, so a test comparing DeepL's exact
# words fails: those failures say nothing about the API). Results: .runtime/deepl-suite/
# junit.xml and the pytest summary; the server is stopped by PID at the end.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
checkout=$(cd "${1:?usage: scripts/deepl-suite.sh DEEPL_PYTHON_CHECKOUT [pytest args]}" && pwd)
shift
work=$repo/.runtime/deepl-suite
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$checkout/pyproject.toml" | head -1)
mkdir -p "$work"

if ! "$work/venv/bin/python" -c "import click, pydantic, pytest, deepl; assert deepl.__version__ == \"$version\"" 2>/dev/null; then
  echo "setting up deepl $version and its test requirements in $work/venv"
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install -q "deepl==$version" "pydantic<2" "pytest<9" typing_extensions click
fi

make -C "$repo" -s demo-model
port=$("$repo/.venv/bin/python" -c 'from tolk.local.processes import free_port; print(free_port())')
rm -f "$work/keys.db"
cat > "$work/tolk.yaml" <<EOF
server: {host: 127.0.0.1, port: $port, request_timeout: 120}
access: {db: $work/keys.db, require_key: true}
models:
  - name: demo
    path: $repo/models/demo
    prompt_format: chat
    max_tokens_ratio: 2.0
    checks: {enabled: false}
    languages: [ar, bg, cs, da, de, el, en, es, et, fi, fr, he, hu, id, it, ja, ko, lt, lv, nb,
                nl, pl, pt, ro, ru, sk, sl, sv, th, tr, uk, vi, zh]
    engine: {max_num_seqs: 16, max_num_batched_tokens: 8192, max_model_len: 2048,
             kv_cache_memory_bytes: 512MiB, max_waiting: 256}
EOF
key=$("$repo/.venv/bin/tolk" keys add deepl-suite --config "$work/tolk.yaml" | grep -o 'tolk-[A-Za-z0-9_-]*' | head -1)

"$repo/.venv/bin/tolk" serve --config "$work/tolk.yaml" > "$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
echo "waiting for the server on port $port (pid $server; log $work/server.log)"
for _ in $(seq 300); do
  if curl -sf "http://127.0.0.1:$port/ready" > /dev/null; then break; fi
  kill -0 "$server" 2>/dev/null || { tail -20 "$work/server.log"; exit 1; }
  sleep 1
done

cd "$checkout"
set +e
DEEPL_SERVER_URL="http://127.0.0.1:$port" DEEPL_AUTH_KEY="$key" \
  "$work/venv/bin/pytest" tests -q -p no:cacheprovider -o addopts="" \
  --junitxml="$work/junit.xml" "$@"
status=$?
set -e
echo "junit: $work/junit.xml"
exit $status
