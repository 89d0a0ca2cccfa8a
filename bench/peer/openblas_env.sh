# shellcheck shell=bash
# Sourced by the scripts that run the PyTorch peers beside chexscale: gives the peers the OpenBLAS
# kernels chexscale runs. chexscale replaces OpenBLAS's SSE3 fallback ("Prescott") on CPUs that
# Debian's OpenBLAS does not know (src/common/openblas_kernels.h); a peer started without
# OPENBLAS_CORETYPE would keep that fallback and multiply 1.5-1.9x slower on such a CPU.

# Exports OPENBLAS_CORETYPE as the kernels `BIN version` reports, unless it is set already or
# chexscale finds no OpenBLAS built for many CPUs.
use_chexscale_openblas_kernels() {  # BIN
  local core
  [ -z "${OPENBLAS_CORETYPE:-}" ] || return 0
  core=$("$1" version | sed -n 's/^OpenBLAS kernels: \([A-Za-z0-9]*\)$/\1/p')
  [ -z "$core" ] || export OPENBLAS_CORETYPE="$core"
}
