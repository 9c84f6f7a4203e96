#!/usr/bin/env bash
# Packs what a real-model run on the GPU machine needs into parts the device tool can carry:
# vLLM's kit (../shared/gpu/make-kit.sh), the verified GGUF (`tolk fetch-model`'s cache),
# FLORES-101, the wheels the kit lacks (py-spy for --profile, pyahocorasick), and this tree
# at HEAD. Writes .gpucarry/00 .. .gpucarry/NN (30 MB each: the device takes 64 MiB a call,
# the checkout's tracked files included, about 27 MB) and, in the last part, launch.sh.
#
#   bash scripts/gpu-carry.sh            # again after a commit: only src.tar is remade
#
# Then, one device call per part, all in one batch: carry [".gpucarry/NN"] and run
#   mkdir -p /tmp/carry && cp .gpucarry/NN/* /tmp/carry/
# and in the last part's call
#   [ $(ls /tmp/carry/chunk.* | wc -l) = N ] && SKIP_1B=1 STEPS="real-quality" \
#     QUALITY_VARIANTS=... bash /tmp/carry/launch.sh
# followed by `bash scripts/gpu-wait.sh 560` calls (they return at once if the launch did
# not run: a machine lost in the middle of the batch comes back bare).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
carry=$root/.gpucarry
exclude=$(git rev-parse --git-path info/exclude)
grep -qx '/.gpucarry/' "$exclude" 2>/dev/null || echo '/.gpucarry/' >> "$exclude"
gguf=$(ls models/.gguf/*.gguf 2>/dev/null | head -1 || true)
if [ ! -d "$carry/00" ]; then
  [ -d .gpukit/1 ] || bash ../shared/gpu/make-kit.sh
  [ -n "$gguf" ] || { make real-model; gguf=$(ls models/.gguf/*.gguf | head -1); }
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/kit" "$work/wheels"
  cp .gpukit/*/kit.part.* .gpukit/1/device-setup.sh "$work/kit/"
  cp -r ../shared/quality/flores101 "$work/"
  cp "$gguf" "$work/"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$work/wheels" py-spy pyahocorasick
  (cd "$work" && tar cf - kit wheels flores101 "$(basename "$gguf")") \
    | split -b 30000000 -d -a 2 - "$work/chunk."
  for part in "$work"/chunk.*; do
    n=${part##*.}; mkdir -p "$carry/$n"; mv "$part" "$carry/$n/"
  done
fi
last=$(ls -d "$carry"/[0-9]* | tail -1)
cat > "$last/launch.sh" <<'LAUNCH'
#!/usr/bin/env bash
# On the device: the carried parts -> kit, wheels, FLORES, GGUF; vLLM installed; this tree
# in /tmp/src; scripts/gpu-benchmarks.sh $STEPS started in the background.
set -eu
mkdir -p /tmp/unpack
[ -f /tmp/unpack/.done ] || { cat /tmp/carry/chunk.* | tar x -C /tmp/unpack; touch /tmp/unpack/.done; }
mkdir -p /tmp/kit && cp /tmp/unpack/kit/* /tmp/kit/
bash /tmp/kit/device-setup.sh | tail -2
python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/unpack/wheels/*.whl 2>&1 \
  | grep -v "already exists" | tail -2 || true
# py-spy's binary straight from its wheel (pip --target left it out on the device).
python3 - /tmp/unpack/wheels/py_spy-*.whl <<'PY' || true
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    data = wheel.read(next(n for n in wheel.namelist() if n.endswith("/scripts/py-spy")))
with open("/usr/local/bin/py-spy", "wb") as out:
    out.write(data)
PY
chmod +x /usr/local/bin/py-spy 2>/dev/null || true
mkdir -p /tmp/models/.gguf
for f in /tmp/unpack/*.gguf; do [ -f "/tmp/models/.gguf/${f##*/}" ] || cp "$f" /tmp/models/.gguf/; done
rm -rf /tmp/src && mkdir -p /tmp/src && tar xzf /tmp/carry/src.tar -C /tmp/src
echo "tolk at $(cat /tmp/src/COMMIT)"
cd /tmp/src
export PYTHONPATH=/tmp/site VLLM_USE_FLASHINFER_SAMPLER=0 DATA=/tmp/unpack/flores101
python3 -c 'import vllm, ahocorasick; print("vllm", vllm.__version__)'
command -v py-spy || echo "no py-spy: no profiles"
rm -rf /tmp/gpu-results
setsid nohup bash scripts/gpu-benchmarks.sh $STEPS > /tmp/bench.out 2>&1 < /dev/null &
sleep 3; cat /tmp/gpu-results/progress.log 2>/dev/null || tail -5 /tmp/bench.out
LAUNCH
arch=$(mktemp -d)
git archive HEAD src scripts configs pyproject.toml Makefile README.md | tar x -C "$arch"
git rev-parse HEAD > "$arch/COMMIT"
(cd "$arch" && tar czf "$last/src.tar" .); rm -rf "$arch"
tracked=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
biggest=$(du -sb "$carry"/* | sort -n | tail -1 | cut -f1)
echo "$(ls -d "$carry"/[0-9]* | wc -l) parts in $carry; tracked files $tracked bytes + largest part $biggest bytes (limit 67108864)"
[ $((tracked + biggest)) -lt 67108864 ] || { echo "too large for one device call: commit less"; exit 1; }
