// PowerSGD's sweeps for CPUs with AVX2 and FMA (built with -mavx2 -mfma; run only where the CPU
// has both).
#define CHX_SWEEP_BYTES 32
#define CHX_SWEEP_ROWS 2
#define CHX_SWEEP_TABLE avx2_powersgd_kernels
#define CHX_SWEEP_NAME "avx2"
#include "distributed/powersgd_sweeps.h"
