#!/usr/bin/env bash
# Installs every Debian package that chexscale, its tests and its benchmarks need.
# Idempotent: quiet and fast when everything is already present.
# Usage: install-deps.sh [--build-only | --image]
#   --build-only  only what building the chexscale binary needs (the image's build stage)
#   --image       also the container tools that `make image` and `make test-image` use
set -euo pipefail

mode="${1:-all}"
case "$mode" in
  all | --build-only | --image) ;;
  *) echo "usage: install-deps.sh [--build-only | --image]" >&2; exit 2 ;;
esac

# What building the binary needs (configured with tests, benchmarks and fuzzers off).
BUILD_PACKAGES=(
  # toolchain
  g++ cmake ninja-build ccache
  # LibTorch (CPU) and a fast BLAS for small convolutions
  libtorch-dev libopenblas0-openmp libgloo-dev
  # libraries
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libspng-dev libpng-dev
  libdeflate-dev zlib1g-dev
  # image decoders: JPEG (TurboJPEG) and DICOM (DCMTK with its JPEG, JPEG-LS and RLE codecs)
  libturbojpeg0-dev libdcmtk-dev
  # the mpi collective backend (OpenMPI)
  libopenmpi-dev
)

# The developer tools, tests and benchmarks.
DEV_PACKAGES=(
  build-essential clang clang-format libclang-rt-14-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev gnuplot-nox openmpi-bin iproute2 procps jq yq
  util-linux
  python3-torch python3-torchvision python3-numpy python3-pil python3-pydicom python3-mpi4py
  # DICOM files compressed by another writer than DCMTK (gdcmconv; tests/data/image)
  libgdcm-tools
  # a private single-node Slurm for tests/slurm
  slurm-wlm munge
)

# The container image: engine, base-image maker and the OCI runtime podman runs with here.
# netavark (podman's network backend) runs iptables for every container on a podman network and
# fails with "netavark: No such file or directory" without it; --no-install-recommends drops it.
IMAGE_PACKAGES=(podman buildah mmdebstrap runc netavark aardvark-dns iptables uidmap)

PACKAGES=("${BUILD_PACKAGES[@]}")
[ "$mode" = --build-only ] || PACKAGES+=("${DEV_PACKAGES[@]}")
if [ "$mode" = --image ]; then PACKAGES+=("${IMAGE_PACKAGES[@]}"); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# Node.js (for offline Kubernetes schema checks) ships on these machines with its own npm;
# Debian's npm conflicts with that nodejs, so install the Debian pair only where none exists.
[ "$mode" = --build-only ] || command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Offline Kubernetes schema validation for rendered manifests (tests only): installed when
# node_modules is missing or older than package.json (a dependency was added since).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
schemas="$here/tests/launch/k8s_schema"
installed="$schemas/node_modules/.package-lock.json"  # npm writes it on every install
if [ "$mode" != --build-only ] && [ -f "$schemas/package.json" ] &&
  { [ ! -f "$installed" ] || [ "$schemas/package.json" -nt "$installed" ]; }; then
  echo "install-deps: npm install in tests/launch/k8s_schema"
  (cd "$schemas" && npm install --silent --no-audit --no-fund >/dev/null)
fi
