// Test helper: writes PNG files of any colour type, bit depth and interlacing with libpng (an
// encoder independent of the libspng decoder under test).
#pragma once

#include <png.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace chexscale::test_util {

struct PngSpec {
  int width = 0;
  int height = 0;
  int color_type = PNG_COLOR_TYPE_GRAY;
  int bit_depth = 8;
  bool interlaced = false;
  std::vector<png_color> palette;  // for PNG_COLOR_TYPE_PALETTE
  int filters = -1;                // PNG_FILTER_* mask for png_set_filter; -1: libpng's choice
};

// `rows` holds height rows of packed samples as libpng expects them (16-bit big-endian).
inline void write_png_variant(const std::string& path, const PngSpec& spec,
                              const std::vector<std::vector<unsigned char>>& rows) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
    throw std::runtime_error("libpng failed writing " + path);
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (spec.color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  }
  if (spec.filters >= 0) png_set_filter(png, PNG_FILTER_TYPE_BASE, spec.filters);
  png_write_info(png, info);
  std::vector<png_bytep> pointers;
  for (const auto& r : rows)
    pointers.push_back(const_cast<png_bytep>(r.data()));
  png_write_image(png, pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

}  // namespace chexscale::test_util
