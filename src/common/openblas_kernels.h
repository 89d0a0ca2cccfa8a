// OpenBLAS's kernels for this CPU. LibTorch's CPU matrix products that do not go through oneDNN
// (among them its 1x1 convolutions on one thread with fewer than 16 images, so every ResNet
// bottleneck of a small-batch worker) call the system BLAS, on Debian an OpenBLAS built for many
// CPUs, which picks its kernels by the CPU's model number when it loads. For a model it does not
// know it falls back to its oldest x86-64 kernels, "Prescott" (SSE3): Debian 12's OpenBLAS 0.3.21
// does so on Intel's model 207 (Emerald Rapids), where ResNet-50 at 64 px then trains 1.6x slower.
// chexscale picks by the CPU's instruction sets instead when OpenBLAS fell back, and leaves an
// explicit OPENBLAS_CORETYPE alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/cpu_vector_sets.h"

namespace chexscale {

// The OpenBLAS core (an OPENBLAS_CORETYPE name) to use instead of `loaded`, the core OpenBLAS
// chose: only when that is its fallback, Prescott, on a CPU with AVX or more; nullopt otherwise.
std::optional<std::string> openblas_core_instead_of(std::string_view loaded,
                                                    const CpuVectorSets& cpu);

// What choose_openblas_kernels() found and did.
struct OpenBlasChoice {
  std::string loaded;     // the kernels OpenBLAS chose ("" without a many-CPU OpenBLAS)
  std::string now;        // the kernels in use after the call
  bool replaced = false;  // chexscale replaced OpenBLAS's fallback
};

// Replaces OpenBLAS's fallback kernels by openblas_core_instead_of()'s choice unless
// OPENBLAS_CORETYPE is set and not empty, and sets OPENBLAS_CORETYPE to it so that child processes
// (workers, peers) load with the same kernels. Call first thing in main(), before any matrix
// product and before any other thread starts. Without an OpenBLAS built for many CPUs it does
// nothing.
OpenBlasChoice choose_openblas_kernels();

// Makes the loaded OpenBLAS use the kernels of `core` (an OPENBLAS_CORETYPE name), as if
// OPENBLAS_CORETYPE had been set when it loaded, and sets OPENBLAS_CORETYPE; returns the kernels
// in use after it ("" without a many-CPU OpenBLAS; OpenBLAS's own choice for a name it does not
// know). The same conditions as for choose_openblas_kernels().
std::string use_openblas_core(const std::string& core);

// The kernels the loaded OpenBLAS uses now ("" without a many-CPU OpenBLAS).
std::string openblas_kernels();

}  // namespace chexscale
