#!/usr/bin/env bash
# Runs README.md's launcher lines as printed: the fenced block after the marker comment
# "<!-- launcher lines:" holds one command a line, for `chexscale launch`, torchrun and mpirun.
# Each runs in a fresh folder holding a small synthetic data set in data/, with the chexscale under
# test first on the PATH, and must train 2 workers to a checkpoint and an epoch record.
# What the test changes, and only that:
#   - the run's sizes: CHEXSCALE_<NAME> variables (README: every option is one), which the lines
#     leave unset: ResNet-18 on 32-pixel images, batch 4, one epoch, one thread each;
#   - mpirun's line: node0 (rank 0's host) becomes 127.0.0.1 and its port 29500 a free one; root
#     is allowed through OpenMPI's OMPI_ALLOW_RUN_AS_ROOT variables, not a flag;
#   - torchrun's port: PET_MASTER_PORT (torchrun's variable for --master_port), a free one.
# Usage: test_readme_launchers.sh CHEXSCALE_BIN README
set -euo pipefail

bin=${1:?usage: test_readme_launchers.sh CHEXSCALE_BIN README}
readme=${2:?usage: test_readme_launchers.sh CHEXSCALE_BIN README}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The block's lines: the marker, then a ```sh fence, then commands up to the closing fence.
block=$(awk '
  /^<!-- launcher lines:/ { marker = 1; next }
  marker && !open { if ($0 == "```sh") { open = 1; next } else { exit 2 } }
  open && /^```/ { closed = 1; exit }
  open { print }
  END { if (!closed) exit 3 }' "$readme") || {
  echo "FAIL: $readme has no '<!-- launcher lines:' marker followed by a closed \`\`\`sh block"
  exit 1
}
launchers=$(printf '%s\n' "$block" | awk '{ print $1 }' | sort | tr '\n' ' ')
if [ "$launchers" != "chexscale mpirun torchrun " ]; then
  echo "FAIL: the block must hold one chexscale launch, one torchrun and one mpirun line; it holds:"
  printf '%s\n' "$block"
  exit 1
fi

# A free TCP port on this host (the kernel's choice, released at once).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$tmp/bin"
ln -s "$(realpath "$bin")" "$tmp/bin/chexscale"
"$bin" synth --out "$tmp/data" --images 64 --size 32 --seed 6 >"$tmp/synth.log" 2>&1 ||
  { echo "FAIL: synth: $(cat "$tmp/synth.log")"; exit 1; }
sizes=(CHEXSCALE_ARCH=resnet18 CHEXSCALE_IMAGE_SIZE=32 CHEXSCALE_CROP_SIZE=32
  CHEXSCALE_BATCH_SIZE=4 CHEXSCALE_EPOCHS=1 CHEXSCALE_LOADER_THREADS=1 CHEXSCALE_VAL_THREADS=1
  CHEXSCALE_INTRA_OP_THREADS=1 CHEXSCALE_COLLECTIVE_TIMEOUT=60 OMP_NUM_THREADS=1)

n=0
while IFS= read -r line; do
  n=$((n + 1))
  run=$tmp/line$n
  mkdir -p "$run"
  ln -s "$tmp/data" "$run/data"
  extra=()
  command=$line
  case "$line" in
    torchrun\ *) extra=(PET_MASTER_PORT="$(free_port)") ;;
    mpirun\ *)
      command=$(printf '%s' "$line" | sed "s/MASTER_ADDR=node0/MASTER_ADDR=127.0.0.1/;
        s/MASTER_PORT=29500/MASTER_PORT=$(free_port)/")
      extra=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        OMPI_MCA_rmaps_base_oversubscribe=1)
      ;;
  esac
  echo "== README line $n: $line"
  [ "$command" = "$line" ] || echo "   run as: $command"
  rc=0
  (cd "$run" && timeout 300 env PATH="$tmp/bin:$PATH" "${sizes[@]}" "${extra[@]}" \
    sh -c "$command") >"$run/output.log" 2>&1 || rc=$?
  out=$(cat "$run/output.log")
  if [ "$rc" -ne 0 ]; then
    fail "README line $n exited $rc: $line"
    tail -30 "$run/output.log"
    continue
  fi
  for rank in 0 1; do
    grep -q "joining as rank $rank of 2 " <<<"$out" || fail "line $n: no rank $rank of 2 joined"
  done
  [ -f "$run/runs/x/checkpoints/best.json" ] || fail "line $n: no runs/x/checkpoints/best.json"
  grep -q '"type":"epoch"' "$run/runs/x/metrics.jsonl" 2>/dev/null ||
    fail "line $n: no epoch record in runs/x/metrics.jsonl"
done <<<"$block"

if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS: README's $n launcher lines trained 2 workers each"
