// Writes the PNG fuzzer's seed corpus into a directory: small 8- and 16-bit gray, gray+alpha, RGB
// and RGBA images with every row filter (the fast path), split IDAT and text chunks, and a palette
// image (libspng's path), each a few hundred bytes.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util/png_builder.h"

namespace tu = chexscale::test_util;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
  std::vector<std::string> seeds;
  const std::string text = tu::png_chunk("tEXt", std::string("Title\0chest", 11));
  for (int color_type : {0, 2, 4, 6}) {
    const std::string raw = tu::random_png_rows(16, 10, tu::png_channels(color_type), 1);
    seeds.push_back(tu::build_png(16, 10, color_type, raw));
    seeds.push_back(tu::build_png(16, 10, color_type, raw, 3, text, text));
  }
  for (int color_type : {0, 2, 4, 6}) {  // 16-bit: two bytes a sample
    const std::string raw = tu::random_png_rows(8, 8, 2 * tu::png_channels(color_type), 2);
    seeds.push_back(tu::kPngSignature + tu::png_ihdr(8, 8, color_type, 16) +
                    tu::png_chunk("IDAT", tu::zlib_compress(raw)) + tu::png_chunk("IEND", ""));
  }
  std::string plte;
  for (int i = 0; i < 48; ++i)
    plte.push_back(static_cast<char>(i * 5));
  std::string indices = tu::random_png_rows(8, 8, 1, 3);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i % 9 != 0) indices[i] = static_cast<char>(static_cast<unsigned char>(indices[i]) % 16);
  }
  seeds.push_back(tu::kPngSignature + tu::png_ihdr(8, 8, 3, 8) + tu::png_chunk("PLTE", plte) +
                  tu::png_chunk("IDAT", tu::zlib_compress(indices)) + tu::png_chunk("IEND", ""));
  for (size_t i = 0; i < seeds.size(); ++i) {
    const std::string path = std::string(argv[1]) + "/seed-" + std::to_string(i) + ".png";
    std::ofstream(path, std::ios::binary) << seeds[i];
  }
  return 0;
}
