// OpenBLAS's kernels for this CPU (openblas_kernels.h). The OpenBLAS functions are looked up at
// run time, so chexscale neither links to OpenBLAS nor needs it: another BLAS is left alone.
#include "common/openblas_kernels.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdlib>

namespace chexscale {
namespace {

// The exported functions of an OpenBLAS built with DYNAMIC_ARCH.
struct OpenBlasEntry {
  const char* (*corename)() = nullptr;
  void (*dynamic_quit)() = nullptr;
  void (*dynamic_init)() = nullptr;
};

OpenBlasEntry find_openblas() {
  OpenBlasEntry e;
  e.corename = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  e.dynamic_quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  e.dynamic_init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  return e;
}

std::string corename_of(const OpenBlasEntry& e) {
  if (e.corename == nullptr || e.dynamic_init == nullptr) return "";
  const char* name = e.corename();
  return name != nullptr ? name : "";
}

}  // namespace

std::optional<std::string> openblas_core_instead_of(std::string_view loaded,
                                                    const CpuVectorSets& cpu) {
  if (loaded.size() != 8 || strncasecmp(loaded.data(), "prescott", 8) != 0) return std::nullopt;
  if (cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq && cpu.avx512cd) {
    return "SkylakeX";
  }
  if (cpu.avx2 && cpu.fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return std::nullopt;
}

OpenBlasChoice choose_openblas_kernels() {
  const OpenBlasEntry openblas = find_openblas();
  OpenBlasChoice choice;
  choice.loaded = corename_of(openblas);
  choice.now = choice.loaded;
  if (choice.loaded.empty() || openblas.dynamic_quit == nullptr) return choice;
  if (const char* set = std::getenv("OPENBLAS_CORETYPE"); set != nullptr && *set != '\0') {
    return choice;  // the user's choice
  }
  const std::optional<std::string> core =
      openblas_core_instead_of(choice.loaded, cpu_vector_sets());
  if (!core) return choice;
  choice.now = use_openblas_core(*core);
  choice.replaced = choice.now != choice.loaded;
  return choice;
}

std::string use_openblas_core(const std::string& core) {
  const OpenBlasEntry openblas = find_openblas();
  if (corename_of(openblas).empty() || openblas.dynamic_quit == nullptr) return "";
  // gotoblas_dynamic_init() reads OPENBLAS_CORETYPE, as at load time; children inherit it.
  ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  openblas.dynamic_quit();
  openblas.dynamic_init();
  return corename_of(openblas);
}

std::string openblas_kernels() {
  return corename_of(find_openblas());
}

}  // namespace chexscale
