// Out-of-line part of the check macros, kept small so call sites stay cheap.
#include "common/error.h"

namespace chexscale::detail {

void throw_check_failure(const char* file, int line, const std::string& what) {
  const char* base = file;
  for (const char* p = file; *p != '\0'; ++p) {
    if (*p == '/') base = p + 1;
  }
  throw Error(fmt::format("{} ({}:{})", what, base, line));
}

}  // namespace chexscale::detail
