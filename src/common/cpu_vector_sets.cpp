// The vector instruction sets this CPU runs (cpu_vector_sets.h), from GCC's CPU detection.
#include "common/cpu_vector_sets.h"

namespace chexscale {

CpuVectorSets cpu_vector_sets() {
  CpuVectorSets s;
#if defined(__x86_64__)
  __builtin_cpu_init();
  s.avx = __builtin_cpu_supports("avx");
  s.avx2 = __builtin_cpu_supports("avx2");
  s.fma = __builtin_cpu_supports("fma");
  s.avx512f = __builtin_cpu_supports("avx512f");
  s.avx512bw = __builtin_cpu_supports("avx512bw");
  s.avx512vl = __builtin_cpu_supports("avx512vl");
  s.avx512dq = __builtin_cpu_supports("avx512dq");
  s.avx512cd = __builtin_cpu_supports("avx512cd");
#endif
  return s;
}

}  // namespace chexscale
