#!/usr/bin/env bash
# Issue 8's GPU check, prepared to run unattended on a machine with NVIDIA GPUs, the CUDA toolkit
# and a pip torch 2.x but no network: builds chexscale against the pip torch's LibTorch, runs the
# unit tests there, checks GPU training against CPU, and measures throughput beside PyTorch eager
# (bench/peer/ddp_bench.py) on the same GPU. Everything goes to $OUT; docs/gpu.md explains it.
#
# Usage: OUT=/some/dir scripts/gpu-check.sh [all | PART...]   PARTs: build correctness sweep
# Environment (defaults): PYTHON (python3), BUILD (build-cuda), BIN ($BUILD/src/cli/chexscale),
#   JOBS (nproc), THREADS (4), ARCHS ("densenet121 resnet50"), BATCHES ("64 128"),
#   MODES ("fp32 bf16 fp32-cl bf16-cl"), IMAGE_SIZE (224), STEPS (20), WARMUP (5),
#   CHECK_ARCH (densenet121) and CHECK_IMAGE_SIZE (128) for the correctness runs,
#   RUN_TIMEOUT (600 s per command), DEVICE (cuda); for the build: CUDA_HOME (/usr/local/cuda),
#   TORCH_CUDA_ARCH_LIST (9.0) and CMAKE_CUDA_ARCHITECTURES (90), the GPUs to configure for.
# DEVICE=cpu rehearses the correctness and sweep parts on a CPU-only machine with an existing
# build (BIN=...): every "GPU" run then runs on the CPU, which checks the script itself
# (tests/e2e/test_gpu_check_rehearsal.cpp does this in `make test`).
# Needs the Debian libraries: installed, or unpacked into third_party/debian by
# scripts/vendor-deps.sh on a machine with network (cmake/Dependencies.cmake finds them there).
# Exit status: 0 when the build, the tests and the correctness check pass (the sweep only
# measures); 1 otherwise, with the failing parts named in $OUT/summary.md.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
parts=" ${*:-all} "
OUT="${OUT:-$here/runs/gpu-check}"
PY="${PYTHON:-python3}"
BUILD="${BUILD:-$here/build-cuda}"
JOBS="${JOBS:-$(nproc)}"
THREADS="${THREADS:-4}"
ARCHS="${ARCHS:-densenet121 resnet50}"
BATCHES="${BATCHES:-64 128}"
MODES="${MODES:-fp32 bf16 fp32-cl bf16-cl}"
IMAGE_SIZE="${IMAGE_SIZE:-224}"
STEPS="${STEPS:-20}"
WARMUP="${WARMUP:-5}"
RUN_TIMEOUT="${RUN_TIMEOUT:-600}"
BIN="${BIN:-$BUILD/src/cli/chexscale}"
DEVICE="${DEVICE:-cuda}"
CHECK_ARCH="${CHECK_ARCH:-densenet121}"
CHECK_IMAGE_SIZE="${CHECK_IMAGE_SIZE:-128}"

for part in $parts; do
  case "$part" in all | build | correctness | sweep) ;; *)
    echo "usage: OUT=DIR $0 [all | build | correctness | sweep ...]" >&2
    exit 2
    ;;
  esac
done
case "$DEVICE" in cuda | cpu) ;; *)
  echo "gpu-check: DEVICE must be cuda or cpu, not '$DEVICE'" >&2
  exit 2
  ;;
esac
wants() { [[ $parts == *" all "* || $parts == *" $1 "* ]]; }
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu-check.log") 2>&1
failures=()
note() { printf '\n== %s  %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() {
  echo "FAILED: $*"
  failures+=("$*")
}
run() { timeout --kill-after=10 "$RUN_TIMEOUT" "$@"; }

# --- the machine and its torch --------------------------------------------------------------
note "environment"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  uname -a
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
  "$PY" - <<'PYEOF'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())
print("cuda available", torch.cuda.is_available(), "devices", torch.cuda.device_count())
print("cxx11 abi", torch.compiled_with_cxx11_abi())
print("cmake prefix", torch.utils.cmake_prefix_path)
import os
inc = os.path.join(os.path.dirname(torch.__file__), "include")
print("bundled fmt headers", os.path.isdir(os.path.join(inc, "fmt")),
      "bundled nlohmann", os.path.isdir(os.path.join(inc, "nlohmann")))
PYEOF
  command -v nvcc && nvcc --version | tail -1
  cmake --version | head -1
  "${CXX:-c++}" --version | head -1
} | tee "$OUT/env.txt"
if [ "$DEVICE" = cpu ]; then
  if wants build; then
    echo "gpu-check: DEVICE=cpu rehearses the correctness and sweep parts only" >&2
    exit 2
  fi
elif ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu-check: torch sees no CUDA device; nothing to check" >&2
  exit 1
elif [ "$("$PY" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')" != 1 ]; then
  echo "gpu-check: this torch uses the old C++ ABI; chexscale's Debian libraries need the new one (docs/gpu.md)" >&2
  exit 1
fi
torch_lib="$("$PY" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
export LD_LIBRARY_PATH="$torch_lib:$here/third_party/debian/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- build against the pip torch's LibTorch -------------------------------------------------
build() {
  note "configure and build in $BUILD"
  local torch_dir generator=() cuda="${CUDA_HOME:-/usr/local/cuda}" name path
  torch_dir="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch"
  command -v ninja >/dev/null && generator=(-G Ninja)
  local cmake_args=(-S "$here" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
    -DTorch_DIR="$torch_dir" -DCHEXSCALE_BUILD_BENCH=OFF -DCHEXSCALE_BUILD_FUZZ=OFF)
  # find_package(Torch) of a CUDA wheel runs Caffe2's public/cuda.cmake: FindCUDA (needs nvcc),
  # enable_language(CUDA) and FindCUDAToolkit, whether or not nvcc is on PATH. The architecture
  # lists skip its GPU probing (chexscale compiles no CUDA code; 9.0 = H100/H200).
  if [ -x "$cuda/bin/nvcc" ]; then
    export PATH="$cuda/bin:$PATH"
    cmake_args+=(-DCUDA_TOOLKIT_ROOT_DIR="$cuda" -DCUDAToolkit_ROOT="$cuda"
      -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc")
  fi
  cmake_args+=(-DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-9.0}"
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:-90}")
  # What the toolkit lacks comes from the pip nvidia-* wheels torch depends on: nccl.h (for
  # ProcessGroupNCCL.hpp), cuDNN and cuSPARSELt (Caffe2Config insists on finding what torch was
  # built with), libnvrtc (in TORCH_LIBRARIES). Wheels ship versioned .so files only, so the
  # libraries are given by path. Each line: <what> <path found in the wheels, or nothing>.
  while read -r name path; do
    [ -n "$path" ] || continue
    case "$name" in
      nccl.h) cmake_args+=(-DCHEXSCALE_NCCL_INCLUDE_DIR="$(dirname "$path")") ;;
      cudnn.h) [ -f "$cuda/include/cudnn.h" ] || cmake_args+=(-DCUDNN_INCLUDE_PATH="$(dirname "$path")") ;;
      libcudnn) [ -f "$cuda/include/cudnn.h" ] || cmake_args+=(-DCUDNN_LIBRARY_PATH="$path") ;;
      cusparseLt.h) cmake_args+=(-DCUSPARSELT_INCLUDE_PATH="$(dirname "$path")") ;;
      libcusparseLt) cmake_args+=(-DCUSPARSELT_LIBRARY_PATH="$path") ;;
      libnvrtc) compgen -G "$cuda/lib*/libnvrtc.so" >/dev/null || cmake_args+=(-DCUDA_nvrtc_LIBRARY="$path") ;;
    esac
  done < <("$PY" - <<'PYEOF'
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
def first(pattern):
    hits = sorted(h for r in roots for h in glob.glob(os.path.join(r, "*", pattern)))
    return hits[0] if hits else ""
for name, pattern in [("nccl.h", "include/nccl.h"), ("cudnn.h", "include/cudnn.h"),
                      ("libcudnn", "lib/libcudnn.so*"), ("cusparseLt.h", "include/cusparseLt.h"),
                      ("libcusparseLt", "lib/libcusparseLt.so*"), ("libnvrtc", "lib/libnvrtc.so*")]:
    print(name, first(pattern))
PYEOF
  )
  printf '%q ' cmake "${cmake_args[@]}" >"$OUT/configure.log"
  echo >>"$OUT/configure.log"
  if ! cmake "${cmake_args[@]}" >>"$OUT/configure.log" 2>&1; then
    tail -30 "$OUT/configure.log"
    fail "configure (see configure.log)"
    return 1
  fi
  grep 'chexscale:' "$OUT/configure.log"
  grep -q 'CUDA ON' "$OUT/configure.log" || fail "configure: LibTorch without CUDA"
  if ! cmake --build "$BUILD" -j "$JOBS" --target chexscale test_common test_train test_train_precision \
    test_distributed \
    >"$OUT/build.log" 2>&1; then
    grep -E 'error|Error' "$OUT/build.log" | head -40
    fail "build (see build.log)"
    return 1
  fi
  note "unit tests on the CUDA build"
  local t
  for t in tests/common/test_common tests/train/test_train_precision tests/train/test_train \
    tests/distributed/test_distributed; do
    if run env OMP_NUM_THREADS=1 CHEXSCALE_BIN="$BIN" CHEXSCALE_SOURCE_DIR="$here" "$BUILD/$t" \
      >"$OUT/$(basename "$t").log" 2>&1; then
      echo "$t: $(grep -E '^\[  PASSED' "$OUT/$(basename "$t").log")"
    else
      grep -E 'FAILED|Failure' "$OUT/$(basename "$t").log" | head -20
      fail "$t (see $(basename "$t").log)"
    fi
  done
  "$BIN" version | tee -a "$OUT/env.txt"
}

# --- correctness: the same steps on CPU and GPU ---------------------------------------------
# Losses step by step (metrics.jsonl), fp32 on the GPU against the CPU (cuDNN's TF32 convolutions
# and other summation orders: 2 %), bf16 and channels-last against GPU fp32; then the GPU run's
# checkpoint evaluated on the CPU and on the GPU (cross-device checkpoint load; 0.1 %).
correctness() {
  note "correctness: $DEVICE steps against CPU steps ($CHECK_ARCH, ${CHECK_IMAGE_SIZE}px)"
  local data="$OUT/correctness/data" dir="$OUT/correctness"
  rm -rf "$dir" && mkdir -p "$dir"
  run "$BIN" synth --out "$data" --images 320 --size "$CHECK_IMAGE_SIZE" --seed 1 \
    >"$dir/synth.log" 2>&1 || { fail "synth"; return 1; }
  local common=(--data "$data" --epochs 1 --max-steps 8 --batch-size 16
    --image-size "$CHECK_IMAGE_SIZE" --crop-size $((CHECK_IMAGE_SIZE * 7 / 8)) --no-augment
    --arch "$CHECK_ARCH" --seed 0 --log-every 1 --loader-threads 2 --lr 1e-4 --no-class-weights)
  # ref: the CPU reference; gpu*: on $DEVICE (the CPU too in a DEVICE=cpu rehearsal).
  local name args
  for name in ref gpu gpu-bf16 gpu-cl; do
    case "$name" in
      ref) args=(--device cpu --intra-op-threads "$THREADS") ;;
      gpu) args=(--device "$DEVICE") ;;
      gpu-bf16) args=(--device "$DEVICE" --amp bf16) ;;
      gpu-cl) args=(--device "$DEVICE" --channels-last) ;;
    esac
    run "$BIN" train "${common[@]}" "${args[@]}" --out "$dir/$name" >"$dir/$name.log" 2>&1 ||
      { tail -5 "$dir/$name.log"; fail "train $name"; }
  done
  local ckpts=("$dir"/gpu/checkpoints/step-*.json)  # zero-padded: the last is the newest
  local ckpt="${ckpts[-1]}"
  for name in cpu "$DEVICE"; do
    run "$BIN" eval --checkpoint "$ckpt" --data "$data" --split val --device "$name" \
      --out "$dir/eval-$name" >"$dir/eval-$name.log" 2>&1 || fail "eval on $name"
  done
  "$PY" - "$dir" "$DEVICE" <<'PYEOF' || fail "correctness tolerances (see above)"
import json, os, sys
d, device = sys.argv[1], sys.argv[2]
def losses(run):
    with open(os.path.join(d, run, "metrics.jsonl")) as f:
        return [r["loss"] for r in map(json.loads, f) if r.get("type") == "step"]
ok = True
def compare(name, got, ref, rel):
    global ok
    usable = got and ref and None not in got + ref  # null: every step of a window skipped
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref)) if usable else float("inf")
    good = len(got) == len(ref) > 0 and worst <= rel
    ok &= good
    print(f"{name:<40} steps {len(got)}/{len(ref)}  worst relative loss difference {worst:.2e}"
          f"  (tolerance {rel:.0e})  {'ok' if good else 'FAIL'}")
compare(f"{device} fp32 vs cpu fp32", losses("gpu"), losses("ref"), 2e-2)
compare(f"{device} bf16 vs {device} fp32", losses("gpu-bf16"), losses("gpu"), 5e-2)
compare(f"{device} channels-last vs NCHW", losses("gpu-cl"), losses("gpu"), 2e-2)
ev = {n: json.load(open(os.path.join(d, f"eval-{n}", "metrics.json")))["loss"] for n in ("cpu", device)}
compare(f"eval of {device} checkpoint: cpu vs {device}", [ev["cpu"]], [ev[device]], 1e-3)
sys.exit(0 if ok else 1)
PYEOF
}

# --- throughput: chexscale beside PyTorch eager, config by config ---------------------------
sweep() {
  note "throughput sweep: $ARCHS x batch $BATCHES x $MODES at ${IMAGE_SIZE}px"
  local dir="$OUT/sweep" arch batch mode amp cl
  mkdir -p "$dir"
  for arch in $ARCHS; do
    for batch in $BATCHES; do
      for mode in $MODES; do
        amp=off
        [[ $mode == bf16* ]] && amp=bf16
        [[ $mode == fp16* ]] && amp=fp16
        cl=()
        [[ $mode == *-cl ]] && cl=(--channels-last)
        local stem="$dir/$arch-b$batch-$mode"
        echo "-- $arch batch $batch $mode"
        run "$BIN" bench --arch "$arch" --image-size "$IMAGE_SIZE" --batch-size "$batch" \
          --steps "$STEPS" --warmup-steps "$WARMUP" --threads "$THREADS" --device "$DEVICE" \
          --amp "$amp" "${cl[@]}" --label chexscale --json "$stem-chexscale.json" \
          >"$stem-chexscale.log" 2>&1 || echo "   chexscale failed (see $stem-chexscale.log)"
        run "$PY" "$here/bench/peer/ddp_bench.py" --device "$DEVICE" --arch "$arch" \
          --image-size "$IMAGE_SIZE" --batch-size "$batch" --steps "$STEPS" \
          --warmup-steps "$WARMUP" --threads "$THREADS" --amp "$amp" "${cl[@]}" \
          --label pytorch-eager --json "$stem-pytorch.json" >"$stem-pytorch.log" 2>&1 ||
          echo "   pytorch failed (see $stem-pytorch.log)"
      done
    done
  done
  "$PY" - "$dir" <<'PYEOF' | tee "$OUT/sweep.md"
import glob, json, os, re, sys
d = sys.argv[1]
print("| arch | batch | mode | chexscale img/s | PyTorch eager img/s | ratio |")
print("|---|---|---|---|---|---|")
# Every configuration run (its logs), so one where both sides failed shows as failed too.
for stem in sorted({p.rsplit("-", 1)[0] for p in glob.glob(os.path.join(d, "*.log"))}):
    arch, batch, mode = re.fullmatch(r"(.+)-b([0-9]+)-(.+)", os.path.basename(stem)).groups()
    def ips(who):
        try:
            return json.load(open(f"{stem}-{who}.json"))["images_per_sec"]
        except (OSError, KeyError, ValueError):
            return None
    c, p = ips("chexscale"), ips("pytorch")
    fmt = lambda v: f"{v:.1f}" if v else "failed"
    ratio = f"{c / p:.3f}" if c and p else "-"
    print(f"| {arch} | {batch} | {mode} | {fmt(c)} | {fmt(p)} | {ratio} |")
PYEOF
}

wants build && build
if [ -x "$BIN" ]; then
  wants correctness && correctness
  wants sweep && sweep
else
  fail "no chexscale binary at $BIN"
fi

{
  echo "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if [ ${#failures[@]} -eq 0 ]; then echo "all checks passed"; else printf -- '- FAILED: %s\n' "${failures[@]}"; fi
  [ -f "$OUT/sweep.md" ] && cat "$OUT/sweep.md"
} >"$OUT/summary.md"
cat "$OUT/summary.md"
[ ${#failures[@]} -eq 0 ]
