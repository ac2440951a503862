#!/usr/bin/env bash
# GPU checks in two steps, because the GPU host has CUDA but no Go:
#
#   scripts/gpu-check.sh build                # on a machine with Go: fills gpu-bundle/
#   gpu-bundle/gpu-check.sh run-verify OUT    # on the GPU host: correctness, forward and backward
#   gpu-bundle/gpu-check.sh run-time OUT      # on the GPU host: forward timing, about 4 minutes
#   gpu-bundle/gpu-check.sh run-time-bwd OUT  # on the GPU host: backward and fwd+bwd timing
#   gpu-bundle/gpu-check.sh run-verify-sm90a OUT  # on the GPU host: the sm_90a forward's correctness
#   gpu-bundle/gpu-check.sh run-time-sm90a OUT    # on the GPU host: sm_90a, sm_80 and Flex forward timing
#   gpu-bundle/gpu-check.sh run OUT           # all five, one after the other
#
# Each run step ends within 5.5 minutes (every command in it has a time
# limit inside that budget), so each fits a 6-minute call; it writes its
# own results file in OUT (run-verify: OUT/gpu-verify.md, run-time:
# OUT/gpu-time.md, run-time-bwd: OUT/gpu-time-bwd.md, run-verify-sm90a:
# OUT/gpu-verify-sm90a.md, run-time-sm90a: OUT/gpu-time-sm90a.md) and the
# raw outputs beside it, at most six files a step. OUT may be relative: it is resolved
# against the directory the script is called from. A step exits non-zero
# when any of its checks failed, ran out of time or could not run, and its
# results file lists which. The backward's additions (its ptxas runs, its
# verify checks, run-time-bwd) and the sm_90a steps have not been timed on
# a GPU host yet.
#
# A session's device time (15 minutes, start-up included) holds two
# calls. In order of what they unlock: (1) run-verify-sm90a (records the
# wgmma goldens first, then verifies the sm_90a forward: its passing
# results file is what lets ptx.SM90aVerified become true) and run-verify
# (the sm_80 forward and the backward on the device); (2) in a later
# session, run-time-sm90a (issue 10's table against FlexAttention) and
# run-time-bwd (issue 9's). run-time (sm_80 alone) is covered by
# run-time-sm90a.
#
# gpu-bundle/ is git-excluded (.gitignore); it holds the attngen binary
# (CGO_ENABLED=0), the CUDA binding's test binary, the example specs, the
# generated PTX, flex_anchor.py (from ../shared/bench, or $FLEX_ANCHOR),
# flex_bench.py, record.cu and this script.
#
# run-verify: ptxas -v of every PTX (the forward's module and the
# backward's, whose two kernels are each checked) for sm_80, sm_90 and
# sm_90a (fails on spills; eight files at a time), the CUDA binding's tests
# on the real driver, attngen verify -gpu on every example (bf16 and f16;
# forward and backward kernels; GPU against the float64 reference, rows
# sampled on the forward's S = 8192 and the backward's S = 4096 shapes, and
# against the PTX interpreter; six specs at a time), and the instruction
# goldens of record.cu (lg2.approx is new: OUT/lg2.json.gz goes to
# verify/ptx/testdata/h200/).
#
# run-time: attngen bench -gpu on the six masks of docs/performance.md (B=4
# H=16 S=8192 D=128 bf16: random normal inputs, median of 30 timed launches
# after 3 warm-up launches, the output of the timed launches checked against
# the float64 reference on sampled rows), then FlexAttention and SDPA on the
# same masks and shapes in the same run (flex_bench.py: flex_anchor.py with
# every timing a median of at least 20 calls after warm-up), and one table
# of both in OUT/gpu-time.md.
#
# run-time-bwd: attngen bench -gpu -pass both on the same six masks and
# shape (the forward, then the backward's dq and dk/dv kernels timed
# together, median of 30 timed launch pairs after 3 warm-ups, the gradients
# of the timed launches checked on sampled dq rows and dk/dv keys), then
# FlexAttention's forward plus backward (flex_bench.py --bwd: the forward
# and backward of flex_attention on requires_grad inputs, medians of at
# least 20 calls), and one table: attngen bwd, attngen fwd+bwd (the sum of
# the two medians) and Flex fwd+bwd. Backward TFLOP/s count 2.5x the
# forward's FLOPs, fwd+bwd 3.5x, on both sides.
#
# run-verify-sm90a: attngen verify -gpu -sm 90a -dtype bf16,f16 on every
# example (six at a time): the sm_90a forward (wgmma, tensor maps encoded
# by the driver and passed by address) against the float64 reference on
# the forward's shapes (rows sampled at S = 8192; residue layouts on
# lengths rounded up to the stride), dependencies, and GPU against the
# interpreter. Generated packages and the runner use the sm_90a kernel
# only when asked for until this step has passed and its results are in
# docs/gpu-results.md; then set ptx.SM90aVerified (emit/ptx/hopper.go) and
# regenerate (go generate ./...) to make it the 9.0 default.
#
# run-time-sm90a: attngen bench -gpu -sm 80,90a on the six masks (both
# forward kernels on the same random inputs, each the median of 30 timed
# launches after 3 warm-ups, each output checked on sampled rows), then
# FlexAttention's forward (flex_bench.py) in the same run, and one table
# of the three in OUT/gpu-time-sm90a.md. Neither sm_90a step has been
# timed on a GPU host yet; their limits keep them inside the budget.
#
# Commit the results files together as docs/gpu-results.md.
set -uo pipefail

budget=330 # seconds one run step may take in all
mode=${1:-}

usage() {
  echo "usage: $0 build | run-verify OUTDIR | run-time OUTDIR | run-time-bwd OUTDIR | run-verify-sm90a OUTDIR | run-time-sm90a OUTDIR | run OUTDIR | record-wgmma OUTDIR" >&2
  exit 2
}

# absdir creates OUTDIR and prints its absolute path.
absdir() {
  [ -n "${1:-}" ] || usage
  mkdir -p -- "$1" && (cd -- "$1" && pwd) || { echo "$0: cannot create $1" >&2; exit 2; }
}

failed=()
# step NAME SECONDS FUNCTION: runs an exported shell function with a time
# limit that ends inside the step's budget, and records a failure.
step() {
  local name=$1 limit=$2 fn=$3 left rc
  left=$((budget - SECONDS))
  if [ "$left" -lt 5 ]; then
    echo "== $name: not run, the ${budget}s budget is spent"
    failed+=("$name: not run, no time left")
    return 1
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "== $name (limit ${limit}s, ${SECONDS}s used)"
  timeout "$limit" bash -c "$fn"
  rc=$?
  if [ "$rc" -ne 0 ]; then
    if [ "$rc" = 124 ]; then failed+=("$name: timed out after ${limit}s"); else failed+=("$name: exit $rc"); fi
  fi
  return "$rc"
}

header() {
  echo "# $1"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "- commit: $(cat commit 2>/dev/null)"
  echo "- machine: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "- CUDA: $(nvcc --version 2>/dev/null | tail -1)"
  echo "- command: \`gpu-check.sh $mode OUT\`"
  echo
}

# finish writes the step's verdict into its results file and exits.
finish() {
  local md=$1
  {
    echo "## verdict"
    echo
    if [ "${#failed[@]}" -eq 0 ]; then
      echo "every step passed (${SECONDS}s)"
    else
      echo "FAILED (${SECONDS}s):"
      for f in "${failed[@]}"; do echo "- $f"; done
    fi
  } >> "$md"
  echo "wrote $md"
  [ "${#failed[@]}" -eq 0 ] || exit 1
  exit 0
}

# ptxas_one FILE: ptxas -v of one PTX module for each architecture it
# targets (sm_80 modules: sm_80, sm_90 and sm_90a; sm_90a modules: sm_90a);
# every kernel of the module must report no spills (a backward module has
# two).
ptxas_one() {
  local f=$1 arch log bad=0 archs="sm_80 sm_90 sm_90a"
  case "$f" in *sm_90a*) archs=sm_90a ;; esac # .target sm_90a assembles for sm_90a only
  for arch in $archs; do
    echo "== $f $arch"
    if ! log=$(ptxas -v --gpu-name "$arch" "$f" -o /dev/null 2>&1); then
      echo "$log"; echo "ptxas FAILED"; bad=1; continue
    fi
    echo "$log" | grep -E "registers|spill|smem"
    if ! echo "$log" | grep -q "spill stores" || echo "$log" | grep "spill stores" | grep -qv "0 bytes spill stores, 0 bytes spill loads"; then
      echo "SPILLS"; bad=1
    fi
  done
  return $bad
}

# do_ptxas runs ptxas_one on every module, eight at a time, and prints the
# logs in file order.
do_ptxas() {
  local logs f bad=0
  logs=$(mktemp -d) || return 1
  ls ptx/*.ptx | xargs -P 8 -I{} bash -c 'ptxas_one {} > "$0/$(basename {}).log" 2>&1 || touch "$0/$(basename {}).bad"' "$logs"
  for f in ptx/*.ptx; do
    cat "$logs/$(basename "$f").log"
    [ -e "$logs/$(basename "$f").bad" ] && bad=1
  done
  rm -rf "$logs"
  [ "$(ls ptx/*.ptx | wc -l)" -gt 0 ] || { echo "no PTX in the bundle"; bad=1; }
  return $bad
}

# A skipped test here means no driver: a failure on the GPU host.
do_cuda() { ./cuda.test -test.run Real -test.v > "$VOUT/cuda.txt" 2>&1; local rc=$?; cat "$VOUT/cuda.txt"; [ "$rc" = 0 ] && ! grep -q -- "--- SKIP" "$VOUT/cuda.txt"; }

do_verify() {
  ls specs/*.yaml | xargs -P 6 -I{} sh -c \
    './attngen verify -gpu -dtype bf16,f16 -spec {} -seed 1 -sample 512 > "$VOUT/$(basename {} .yaml).txt" 2>&1'
}

do_goldens() {
  nvcc -O2 -arch=sm_90 -o /tmp/record record.cu && rm -rf /tmp/goldens && mkdir -p /tmp/goldens &&
    /tmp/record /tmp/goldens && gzip -9c /tmp/goldens/lg2.json > "$OUT/lg2.json.gz"
}

do_bench() {
  local m bad=0
  for m in causal window block bridge dilated streaming; do
    echo "== $m" >&2
    timeout 75 ./attngen bench -gpu -spec "specs/$m.yaml" -batch 4 -heads 16 -seq 8192 -json || bad=1
  done
  return $bad
}

do_flex() {
  [ -f flex_anchor.py ] || { echo "flex_anchor.py is not in the bundle (build with FLEX_ANCHOR=path)"; return 1; }
  PYTHONUNBUFFERED=1 python3 flex_bench.py --out "$OUT/${FLEX_JSON:-flex.json}"
}

# The backward: attngen's fwd and bwd rows of each mask (one line of JSON
# each), FlexAttention's forward and forward plus backward.
do_bench_bwd() {
  local m bad=0
  for m in causal window block bridge dilated streaming; do
    echo "== $m" >&2
    timeout 75 ./attngen bench -gpu -pass both -spec "specs/$m.yaml" -batch 4 -heads 16 -seq 8192 -json || bad=1
  done
  return $bad
}

do_flex_bwd() {
  [ -f flex_anchor.py ] || { echo "flex_anchor.py is not in the bundle (build with FLEX_ANCHOR=path)"; return 1; }
  PYTHONUNBUFFERED=1 python3 flex_bench.py --bwd --out "$OUT/flex-bwd.json"
}

do_table_bwd() {
  python3 - "$OUT/bench-bwd.jsonl" "$OUT/flex-bwd.json" <<'PY'
import json, sys
flexname = {"causal": "causal", "window": "window1024", "block": "block256",
            "bridge": "bridge256r32", "dilated": "dilated8", "streaming": "sink4+window1024"}
fwd, bwd = {}, {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("["):
        for r in json.loads(line):
            (bwd if r.get("pass") == "bwd" else fwd)[r["mask"]] = r
try:
    flex = json.load(open(sys.argv[2]))
except Exception as e:
    flex = {"env": {}, "rows": []}
    print(f"flex_anchor.py wrote no results: {e!r}\n")
fl = {r["mask"]: r for r in flex.get("rows", [])}
env = flex.get("env", {})
if env:
    print(f"FlexAttention side: {env.get('gpu')}, torch {env.get('torch')}, shape {env.get('shape')}\n")
print("| mask | attngen bwd ms (median) | bwd TFLOP/s | bwd gradient check | attngen fwd+bwd ms | fwd+bwd TFLOP/s | Flex fwd+bwd ms | Flex fwd+bwd TFLOP/s | attngen / Flex |")
print("|---|---|---|---|---|---|---|---|---|")
for m, fn in flexname.items():
    f, b, x = fwd.get(m), bwd.get(m), fl.get(fn, {})
    if b:
        a = f"{b['ms']:.3f} | {b['tflops']:.1f} | {b['check'][:60]}"
    else:
        a = "- | - | not run"
    both = None
    if f and b:
        ms = f["ms"] + b["ms"]
        both = 3.5 * 4 * f["batch"] * f["heads"] * f["head_dim"] * f["kept_pairs"] / (ms / 1e3) / 1e12
        a += f" | {ms:.3f} | {both:.1f}"
    else:
        a += " | - | -"
    if "flex_fwdbwd_ms" in x:
        c = f"{x['flex_fwdbwd_ms']:.3f} | {x['flex_fwdbwd_tflops']:.1f}"
        ratio = f"{both / x['flex_fwdbwd_tflops']:.2f}x" if both else "-"
    else:
        c, ratio = (f"error: {x['error'][:40]}" if "error" in x else "-") + " | -", "-"
    print(f"| {m} ({fn}) | {a} | {c} | {ratio} |")
print("\nattngen bwd: the dq and dk/dv kernels timed together (CUDA events, median of the timed launch pairs); "
      "fwd+bwd: the sum of the forward's and the backward's medians. TFLOP/s count 4*B*H*D*kept_pairs per forward, "
      "2.5x that for bwd, 3.5x for fwd+bwd (Flex: forward plus backward of flex_attention on requires_grad inputs). "
      "Both sides: random normal bf16 inputs, median after warm-up.")
PY
}

do_table() {
  python3 - "$OUT/bench.jsonl" "$OUT/flex.json" <<'PY'
import json, sys
flexname = {"causal": "causal", "window": "window1024", "block": "block256",
            "bridge": "bridge256r32", "dilated": "dilated8", "streaming": "sink4+window1024"}
ours = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("["):
        for r in json.loads(line):
            ours[r["mask"]] = r
try:
    flex = json.load(open(sys.argv[2]))
except Exception as e:
    flex = {"env": {}, "rows": []}
    print(f"flex_anchor.py wrote no results: {e!r}\n")
fl = {r["mask"]: r for r in flex.get("rows", [])}
env = flex.get("env", {})
if env:
    print(f"FlexAttention side: {env.get('gpu')}, torch {env.get('torch')}, shape {env.get('shape')}; "
          f"bf16 matmul {env.get('bf16_matmul_tflops', 0):.0f} TFLOP/s; SDPA causal {env.get('sdpa_causal_ms', 0):.3f} ms\n")
print("| mask | attngen ms (median) | attngen TFLOP/s | runs | min-max ms | output check | Flex ms | Flex TFLOP/s | attngen / Flex |")
print("|---|---|---|---|---|---|---|---|---|")
for m, fn in flexname.items():
    o, f = ours.get(m), fl.get(fn, {})
    if o:
        a = f"{o['ms']:.3f} | {o['tflops']:.1f} | {o['runs']} | {o['ms_min']:.3f}-{o['ms_max']:.3f} | {o['check'][:60]}"
    else:
        a = "- | - | - | - | not run"
    if "flex_fwd_ms" in f:
        b = f"{f['flex_fwd_ms']:.3f} | {f['flex_fwd_tflops']:.1f}"
        ratio = f"{o['tflops'] / f['flex_fwd_tflops']:.2f}x" if o else "-"
    else:
        b, ratio = (f"error: {f['error'][:40]}" if "error" in f else "-") + " | -", "-"
    print(f"| {m} ({fn}) | {a} | {b} | {ratio} |")
print("\nEffective TFLOP/s = 4*B*H*D*kept_pairs / time; both sides: random normal bf16 inputs, median after warm-up.")
PY
}

# The sm_90a forward on the device: every example, both element types.
do_verify_sm90a() {
  ls specs/*.yaml | xargs -P 6 -I{} sh -c \
    './attngen verify -gpu -sm 90a -dtype bf16,f16 -spec {} -seed 1 -sample 512 > "$VOUT/$(basename {} .yaml).txt" 2>&1'
}

# The sm_80 and sm_90a forwards of each mask, one JSON array a mask.
do_bench_sm90a() {
  local m bad=0
  for m in causal window block bridge dilated streaming; do
    echo "== $m" >&2
    timeout 80 ./attngen bench -gpu -sm 80,90a -spec "specs/$m.yaml" -batch 4 -heads 16 -seq 8192 -json || bad=1
  done
  return $bad
}

do_table_sm90a() {
  python3 - "$OUT/bench-sm90a.jsonl" "$OUT/flex-sm90a.json" <<'PY'
import json, sys
flexname = {"causal": "causal", "window": "window1024", "block": "block256",
            "bridge": "bridge256r32", "dilated": "dilated8", "streaming": "sink4+window1024"}
ours = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("["):
        for r in json.loads(line):
            ours[(r["mask"], r.get("target", "sm_80"))] = r
try:
    flex = json.load(open(sys.argv[2]))
except Exception as e:
    flex = {"env": {}, "rows": []}
    print(f"flex_anchor.py wrote no results: {e!r}\n")
fl = {r["mask"]: r for r in flex.get("rows", [])}
env = flex.get("env", {})
if env:
    print(f"FlexAttention side: {env.get('gpu')}, torch {env.get('torch')}, shape {env.get('shape')}\n")
print("| mask | sm_90a ms | sm_90a TFLOP/s | sm_90a output check | sm_80 ms | sm_80 TFLOP/s | sm_80 output check | Flex ms | Flex TFLOP/s | sm_90a / Flex | sm_90a / sm_80 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for m, fn in flexname.items():
    h, a, f = ours.get((m, "sm_90a")), ours.get((m, "sm_80")), fl.get(fn, {})
    cell = lambda o: f"{o['ms']:.3f} | {o['tflops']:.1f} | {o['check'][:50]}" if o else "- | - | not run"
    if "flex_fwd_ms" in f:
        b = f"{f['flex_fwd_ms']:.3f} | {f['flex_fwd_tflops']:.1f}"
        rf = f"{h['tflops'] / f['flex_fwd_tflops']:.2f}x" if h else "-"
    else:
        b, rf = (f"error: {f['error'][:40]}" if "error" in f else "-") + " | -", "-"
    ra = f"{h['tflops'] / a['tflops']:.2f}x" if h and a else "-"
    print(f"| {m} ({fn}) | {cell(h)} | {cell(a)} | {b} | {rf} | {ra} |")
print("\nEffective TFLOP/s = 4*B*H*D*kept_pairs / time; all three on random normal bf16 inputs, median after warm-up, in one run; "
      "attngen's two kernels on the same inputs, each output checked against the float64 reference on sampled rows.")
PY
}

export -f ptxas_one do_ptxas do_cuda do_verify do_goldens do_bench do_flex do_table do_bench_bwd do_flex_bwd do_table_bwd do_verify_sm90a do_bench_sm90a do_table_sm90a

# ---- record-wgmma (issue 10) ------------------------------------------------
#
#   gpu-bundle/gpu-check.sh record-wgmma OUT  # on the GPU host: under a minute
#
# Records wgmma.mma_async (sm_90a) and cp.async.bulk.tensor on the GPU with
# the bundle's wgmmarec.test (verify/ptx/wgmmarec: PTX generated in Go and
# JIT-compiled by the driver, so no nvcc), then replays both recordings
# through the PTX interpreter. Writes OUT/wgmma.json.gz and
# OUT/tensorcopy.json.gz (commit both under verify/ptx/testdata/h200/),
# OUT/wgmma-replay.txt (how many recorded outputs the interpreter
# reproduces, and how the others differ), OUT/wgmma-record.txt (the test
# log) and OUT/gpu-wgmma.md. Differences do not fail the step; a recording
# that could not be made (no GPU, a JIT or launch error) does. Under the
# interpreter the same recording and replay take 2 to 5 seconds
# (ATTNGEN_RECORD_INTERP=1 rehearses it without a GPU).
do_record_wgmma() {
  ATTNGEN_RECORD="$OUT" ./wgmmarec.test -test.run 'TestRecordWgmma$' -test.v -test.timeout 140s > "$OUT/wgmma-record.txt" 2>&1
  local rc=$?
  cat "$OUT/wgmma-record.txt"
  [ "$rc" = 0 ] && ! grep -q -- "--- SKIP" "$OUT/wgmma-record.txt" && [ -s "$OUT/wgmma.json.gz" ] && [ -s "$OUT/tensorcopy.json.gz" ]
}
export -f do_record_wgmma
if [ "$mode" = record-wgmma ]; then
  OUT=$(absdir "${2:-}") || exit 2
  export OUT
  cd "$(dirname "$0")" || exit 2
  md="$OUT/gpu-wgmma.md"
  header "wgmma and tensor-copy recording (issue 10)" > "$md"
  step "record wgmma and cp.async.bulk.tensor (wgmmarec.test)" 150 do_record_wgmma > /dev/null 2>&1
  { echo "## replay of the recording through the interpreter"; echo '```'; cat "$OUT/wgmma-replay.txt" 2>/dev/null || tail -20 "$OUT/wgmma-record.txt"; echo '```'; } >> "$md"
  finish "$md"
fi
# ---- end of record-wgmma ------------------------------------------------------

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
    for f in "$d"backward_sm_*.ptx; do
      [ -f "$f" ] && cp "$f" "$b/ptx/$n.bwd.$(basename "$f" .ptx | sed 's/^backward_//').ptx"
    done
  done
  flex="${FLEX_ANCHOR:-$root/../shared/bench/flex_anchor.py}"
  if [ -f "$flex" ]; then cp "$flex" "$b/"; else echo "warning: flex_anchor.py not found at $flex (set FLEX_ANCHOR); run-time will fail its FlexAttention step"; fi
  cp scripts/flex_bench.py verify/ptx/testdata/record.cu "$b/"
  cp "$0" "$b/gpu-check.sh"
  CGO_ENABLED=0 go test -c -o "$b/wgmmarec.test" ./verify/ptx/wgmmarec # record-wgmma
  git rev-parse HEAD > "$b/commit" 2>/dev/null || true
  echo "bundle ready: $b ($(du -sh "$b" | cut -f1))"
  ;;
run-verify)
  OUT=$(absdir "${2:-}") || exit 2
  VOUT=$(mktemp -d) || exit 2
  trap 'rm -rf "$VOUT"' EXIT
  export OUT VOUT
  cd "$(dirname "$0")" || exit 2
  md="$OUT/gpu-verify.md"
  header "GPU verification" > "$md"
  step "ptxas -v (sm_80, sm_90, sm_90a; no spills)" 60 do_ptxas > "$OUT/ptxas.txt" 2>&1
  { echo "## ptxas -v"; echo '```'; grep -E "^==|Used|spill|FAILED|SPILLS" "$OUT/ptxas.txt" | sed 's/ptxas info    : //' | awk '/^==/{if(l)print l; l=$0; next} {l=l " |" $0} END{if(l)print l}' | head -120; echo '```'; } >> "$md"
  step "CUDA binding on the real driver" 60 do_cuda > "$OUT/cuda-real.txt" 2>&1
  { echo "## CUDA binding on the real driver"; echo '```'; tail -20 "$OUT/cuda-real.txt"; echo '```'; } >> "$md"
  step "attngen verify -gpu, every example, bf16 and f16" 200 do_verify > "$OUT/verify-log.txt" 2>&1
  for f in "$VOUT"/*.txt; do [ "$f" = "$VOUT/cuda.txt" ] || { echo "==== $(basename "$f" .txt)"; cat "$f"; }; done > "$OUT/verify.txt" 2>&1
  cat "$OUT/verify-log.txt" >> "$OUT/verify.txt"; rm -f "$OUT/verify-log.txt"
  {
    echo "## attngen verify -gpu"; echo '```'
    for f in "$VOUT"/*.txt; do
      [ "$f" = "$VOUT/cuda.txt" ] && continue
      echo "$(basename "$f" .txt): $(tail -1 "$f")"
      grep -E "FAIL|^gpu: " "$f" | head -10 | sed 's/^/    /'
    done
    echo '```'
  } >> "$md"
  step "instruction goldens (record.cu)" 90 do_goldens > "$OUT/record.txt" 2>&1
  { echo "## instruction goldens (record.cu; lg2.approx is new)"; echo '```'; tail -15 "$OUT/record.txt"; echo '```'; } >> "$md"
  finish "$md"
  ;;
run-time)
  OUT=$(absdir "${2:-}") || exit 2
  export OUT
  cd "$(dirname "$0")" || exit 2
  md="$OUT/gpu-time.md"
  header "GPU timing: attngen and FlexAttention, B=4 H=16 S=8192 D=128 bf16 forward" > "$md"
  step "attngen bench -gpu, six masks" 150 do_bench > "$OUT/bench.jsonl" 2> "$OUT/bench-log.txt"
  step "FlexAttention and SDPA (flex_bench.py)" 200 do_flex > "$OUT/flex.txt" 2>&1
  { echo "## attngen and FlexAttention, same run"; echo; do_table; echo; echo '```'; tail -12 "$OUT/flex.txt"; echo '```'; } >> "$md" 2>&1
  finish "$md"
  ;;
run-time-bwd)
  OUT=$(absdir "${2:-}") || exit 2
  export OUT
  cd "$(dirname "$0")" || exit 2
  md="$OUT/gpu-time-bwd.md"
  header "GPU timing: attngen backward and FlexAttention forward+backward, B=4 H=16 S=8192 D=128 bf16" > "$md"
  step "attngen bench -gpu -pass both, six masks" 130 do_bench_bwd > "$OUT/bench-bwd.jsonl" 2> "$OUT/bench-bwd-log.txt"
  step "FlexAttention forward and backward (flex_bench.py --bwd)" 190 do_flex_bwd > "$OUT/flex-bwd.txt" 2>&1
  { echo "## attngen backward and FlexAttention forward+backward, same run"; echo; do_table_bwd; echo; echo '```'; tail -12 "$OUT/flex-bwd.txt"; echo '```'; } >> "$md" 2>&1
  finish "$md"
  ;;
run-verify-sm90a)
  OUT=$(absdir "${2:-}") || exit 2
  VOUT=$(mktemp -d) || exit 2
  trap 'rm -rf "$VOUT"' EXIT
  export OUT VOUT
  cd "$(dirname "$0")" || exit 2
  md="$OUT/gpu-verify-sm90a.md"
  header "GPU verification of the sm_90a forward" > "$md"
  # the wgmma and tensor-copy goldens first: seconds on a GPU, and they
  # pin the interpreter's model of what the kernel below runs on
  step "record wgmma and cp.async.bulk.tensor (wgmmarec.test)" 45 do_record_wgmma > /dev/null 2>&1
  { echo "## wgmma recording, replayed through the interpreter"; echo '```'; cat "$OUT/wgmma-replay.txt" 2>/dev/null || tail -20 "$OUT/wgmma-record.txt" 2>/dev/null; echo '```'; } >> "$md"
  step "attngen verify -gpu -sm 90a, every example, bf16 and f16" 270 do_verify_sm90a > "$OUT/verify-sm90a-log.txt" 2>&1
  for f in "$VOUT"/*.txt; do echo "==== $(basename "$f" .txt)"; cat "$f"; done > "$OUT/verify-sm90a.txt" 2>&1
  cat "$OUT/verify-sm90a-log.txt" >> "$OUT/verify-sm90a.txt"; rm -f "$OUT/verify-sm90a-log.txt"
  {
    echo "## attngen verify -gpu -sm 90a"; echo '```'
    for f in "$VOUT"/*.txt; do
      echo "$(basename "$f" .txt): $(tail -1 "$f")"
      grep -E "FAIL|^gpu: " "$f" | head -10 | sed 's/^/    /'
    done
    echo '```'
  } >> "$md"
  finish "$md"
  ;;
run-time-sm90a)
  OUT=$(absdir "${2:-}") || exit 2
  export OUT
  cd "$(dirname "$0")" || exit 2
  md="$OUT/gpu-time-sm90a.md"
  header "GPU timing: attngen sm_90a and sm_80 forwards and FlexAttention, B=4 H=16 S=8192 D=128 bf16" > "$md"
  step "attngen bench -gpu -sm 80,90a, six masks" 170 do_bench_sm90a > "$OUT/bench-sm90a.jsonl" 2> "$OUT/bench-sm90a-log.txt"
  FLEX_JSON=flex-sm90a.json step "FlexAttention and SDPA (flex_bench.py)" 160 do_flex > "$OUT/flex-sm90a.txt" 2>&1
  { echo "## attngen (sm_90a, sm_80) and FlexAttention, same run"; echo; do_table_sm90a; echo; echo '```'; tail -12 "$OUT/flex-sm90a.txt"; echo '```'; } >> "$md" 2>&1
  finish "$md"
  ;;
run)
  [ -n "${2:-}" ] || usage
  "$0" run-verify "$2"; a=$?
  "$0" run-time "$2"; b=$?
  "$0" run-time-bwd "$2"; c=$?
  "$0" run-verify-sm90a "$2"; d=$?
  "$0" run-time-sm90a "$2"; e=$?
  [ "$a" = 0 ] && [ "$b" = 0 ] && [ "$c" = 0 ] && [ "$d" = 0 ] && [ "$e" = 0 ]
  ;;
*)
  usage
  ;;
esac
