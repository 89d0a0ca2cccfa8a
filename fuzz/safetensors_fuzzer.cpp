// libFuzzer target for the safetensors parser: any input must parse or raise DataError, never crash
// or read out of bounds (built with AddressSanitizer + UBSan). A file that parses must survive a
// serialize -> parse round trip with identical entries and bytes.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "models/safetensors_format.h"

namespace st = chexscale::models::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  st::ParsedFile parsed;
  try {
    parsed = st::parse(data, size);
  } catch (const chexscale::DataError&) {
    return 0;  // rejected cleanly
  }
  std::vector<st::TensorBytes> tensors;
  for (const auto& t : parsed.tensors) {
    tensors.push_back(
        {t.name, t.dtype, t.shape,
         std::string_view(reinterpret_cast<const char*>(data) + parsed.data_start + t.begin,
                          t.end - t.begin)});
  }
  const std::string again = st::serialize(tensors, parsed.metadata);
  const st::ParsedFile reparsed =
      st::parse(reinterpret_cast<const uint8_t*>(again.data()), again.size());
  if (reparsed.tensors.size() != parsed.tensors.size() || reparsed.metadata != parsed.metadata) {
    __builtin_trap();
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& r = reparsed.tensors[i];
    if (r.name != tensors[i].name || r.dtype != tensors[i].dtype || r.shape != tensors[i].shape ||
        r.end - r.begin != tensors[i].bytes.size() ||
        std::memcmp(again.data() + reparsed.data_start + r.begin, tensors[i].bytes.data(),
                    tensors[i].bytes.size()) != 0) {
      __builtin_trap();
    }
  }
  return 0;
}
