#!/usr/bin/env bash
# GPU checks in two steps, because the GPU host has CUDA but no Go:
#
#   scripts/gpu-check.sh build            # on a machine with Go: fills gpu-bundle/
#   gpu-bundle/gpu-check.sh run OUT       # on the GPU host: every check, results in OUT/
#
# gpu-bundle/ is git-excluded (.gitignore); it holds the attngen binary
# (CGO_ENABLED=0), the CUDA binding's test binary, the example specs, the
# generated PTX, flex_anchor.py and this script. The run step does, in one
# pass: ptxas -v on every PTX for sm_80 and sm_90 (registers, spills,
# shared memory), attngen verify -gpu on every example (GPU vs float64
# reference and vs the PTX interpreter), the GPU benchmark of the six masks
# of PERFORMANCE.md (B=4 H=16 S=8192 D=128 bf16) and flex_anchor.py on the
# same shapes, records the lg2.approx goldens with record.cu, and writes
# OUT/gpu-results.md plus the raw outputs (7 files). Copy
# OUT/gpu-results.md to docs/gpu-results.md and OUT/lg2.json.gz to
# verify/ptx/testdata/h200/, and commit them.
set -uo pipefail

mode=${1:-}
case "$mode" in
build)
  set -e
  root=$(cd "$(dirname "$0")/.." && pwd)
  b="$root/gpu-bundle"
  rm -rf "$b" && mkdir -p "$b/ptx" "$b/specs"
  cd "$root"
  CGO_ENABLED=0 go build -o "$b/attngen" ./cmd/attngen
  CGO_ENABLED=0 go test -c -o "$b/cuda.test" ./cuda
  cp spec/examples/*.yaml "$b/specs/"
  for d in generated/*/; do
    n=$(basename "$d")
    for f in "$d"forward_sm_*.ptx; do
      [ -f "$f" ] && cp "$f" "$b/ptx/$n.$(basename "$f" .ptx | sed 's/^forward_//').ptx"
    done
  done
  flex="${FLEX_ANCHOR:-$root/../shared/bench/flex_anchor.py}"
  if [ -f "$flex" ]; then cp "$flex" "$b/"; else echo "warning: flex_anchor.py not found at $flex (set FLEX_ANCHOR)"; fi
  cp verify/ptx/testdata/record.cu "$b/"
  cp "$0" "$b/gpu-check.sh"
  git rev-parse HEAD > "$b/commit" 2>/dev/null || true
  echo "bundle ready: $b ($(du -sh "$b" | cut -f1))"
  ;;
run)
  out=${2:?usage: gpu-check.sh run OUTDIR}
  mkdir -p "$out"
  cd "$(dirname "$0")"
  md="$out/gpu-results.md"
  {
    echo "# GPU results"
    echo
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- commit: $(cat commit 2>/dev/null)"
    echo "- machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    echo "- CUDA: $(nvcc --version 2>/dev/null | tail -1)"
    echo "- commands: \`gpu-check.sh run OUT\` (ptxas -v, attngen verify -gpu, attngen bench -gpu, flex_anchor.py)"
    echo
  } > "$md"
  echo "## ptxas -v" >> "$md"; echo '```' >> "$md"
  for f in ptx/*.ptx; do
    for arch in sm_80 sm_90; do
      echo "== $f $arch"
      ptxas -v --gpu-name "$arch" "$f" -o /dev/null 2>&1 | grep -E "registers|spill|smem|error" || echo "ptxas failed"
    done
  done > "$out/ptxas.txt" 2>&1
  cat "$out/ptxas.txt" >> "$md"; echo '```' >> "$md"
  echo "## CUDA binding on the real driver" >> "$md"; echo '```' >> "$md"
  ./cuda.test -test.run Real -test.v > "$out/cuda-real.txt" 2>&1; tail -20 "$out/cuda-real.txt" >> "$md"; echo '```' >> "$md"
  echo "## attngen verify -gpu" >> "$md"; echo '```' >> "$md"
  for s in specs/*.yaml; do
    echo "== $s"
    timeout 300 ./attngen verify -gpu -spec "$s" -seed 1 2>&1 | grep -E "FAIL|gpu|passed|FAILED" | head -40
  done > "$out/verify.txt" 2>&1
  cat "$out/verify.txt" >> "$md"; echo '```' >> "$md"
  echo "## attngen bench -gpu (B=4 H=16 S=8192 D=128, bf16, forward)" >> "$md"; echo '```' >> "$md"
  for m in causal window block bridge dilated streaming; do
    timeout 120 ./attngen bench -gpu -spec "specs/$m.yaml" -batch 4 -heads 16 -seq 8192 -reps 10 -json 2>&1
  done > "$out/bench.jsonl"
  cat "$out/bench.jsonl" >> "$md"; echo '```' >> "$md"
  echo "## flex_anchor.py (same shapes, same run)" >> "$md"; echo '```' >> "$md"
  if [ -f flex_anchor.py ]; then
    timeout 600 python3 flex_anchor.py --out "$out/flex.json" > /tmp/flex.txt 2>&1
    tail -30 /tmp/flex.txt >> "$md"
  else
    echo "flex_anchor.py not in the bundle" >> "$md"
  fi
  echo '```' >> "$md"
  echo "## instruction goldens (record.cu; lg2.approx is new)" >> "$md"
  if nvcc -O2 -arch=sm_90 -o /tmp/record record.cu >> "$md" 2>&1 && mkdir -p /tmp/goldens && /tmp/record /tmp/goldens >> "$md" 2>&1; then
    gzip -9c /tmp/goldens/lg2.json > "$out/lg2.json.gz" && echo "lg2.json.gz recorded" >> "$md"
  else
    echo "recording failed" >> "$md"
  fi
  echo "wrote $md"
  ;;
*)
  echo "usage: $0 build | run OUTDIR" >&2
  exit 2
  ;;
esac
