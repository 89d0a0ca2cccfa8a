// PowerSGD's sweeps for any CPU the build targets (16-byte vectors: SSE2 on x86-64, NEON on ARM).
#define CHX_SWEEP_BYTES 16
#define CHX_SWEEP_ROWS 2
#define CHX_SWEEP_TABLE baseline_powersgd_kernels
#define CHX_SWEEP_NAME "baseline"
#include "distributed/powersgd_sweeps.h"
