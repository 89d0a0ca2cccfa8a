// Writes the fuzzer's seed corpus into a directory: valid safetensors files of every dtype
// (scalars, empty tensors, metadata) and hostile variants of them (truncated, bad lengths, broken
// headers).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "models/safetensors_format.h"

namespace st = chexscale::models::safetensors;

namespace {

std::vector<std::string> valid_files() {
  const std::string bytes64(64, '\x3c');
  auto view = [&bytes64](std::size_t n) { return std::string_view(bytes64.data(), n); };
  return {
      st::serialize({}, {}),
      st::serialize(
          {{"w", st::Dtype::kF32, {2, 2}, view(16)}, {"b", st::Dtype::kF32, {2}, view(8)}},
          {{"format", "pt"}}),
      st::serialize({{"h", st::Dtype::kF16, {3}, view(6)},
                     {"bf", st::Dtype::kBF16, {1, 2}, view(4)},
                     {"d", st::Dtype::kF64, {1}, view(8)}},
                    {}),
      st::serialize({{"n", st::Dtype::kI64, {}, view(8)},
                     {"e", st::Dtype::kF32, {0, 4}, view(0)},
                     {"u", st::Dtype::kU8, {5}, view(5)},
                     {"q", st::Dtype::kBool, {2}, view(2)}},
                    {{"arch", "resnet18"}}),
  };
}

// Hostile variants of one valid file.
std::vector<std::string> variants(const std::string& valid) {
  std::vector<std::string> out;
  for (std::size_t cut :
       {std::size_t{0}, std::size_t{7}, std::size_t{9}, valid.size() / 2, valid.size() - 1}) {
    if (cut < valid.size()) out.push_back(valid.substr(0, cut));
  }
  std::string longer = valid;
  longer[0] = static_cast<char>(longer[0] + 1);  // header length off by one
  out.push_back(longer);
  out.push_back(valid + "trailing");
  std::string broken = valid;
  if (broken.size() > 12) broken[12] = '[';
  out.push_back(broken);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  int n = 0;
  for (const std::string& valid : valid_files()) {
    std::vector<std::string> files = variants(valid);
    files.push_back(valid);
    for (const std::string& bytes : files) {
      std::ofstream(std::string(argv[1]) + "/seed-" + std::to_string(n++), std::ios::binary)
          << bytes;
    }
  }
  std::printf("wrote %d seed files to %s\n", n, argv[1]);
  return 0;
}
