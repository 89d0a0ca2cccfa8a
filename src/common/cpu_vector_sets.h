// The vector instruction sets this CPU runs, for the code that picks kernels by them (OpenBLAS's
// kernels, PowerSGD's sweeps).
#pragma once

namespace chexscale {

struct CpuVectorSets {
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512cd = false;
};

// This CPU's (all false off x86-64).
CpuVectorSets cpu_vector_sets();

}  // namespace chexscale
