// PNG decoding to gray (the fast path, else libspng) and encoding from gray (see png_io.h).
#include "data/image/png_io.h"

#include <fcntl.h>
#include <spng.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/error.h"
#include "data/image/png_fast_decode.h"

namespace chexscale::data {
namespace {

struct CtxDeleter {
  void operator()(spng_ctx* ctx) const { spng_ctx_free(ctx); }
};
using SpngCtx = std::unique_ptr<spng_ctx, CtxDeleter>;

[[noreturn]] void fail(const std::string& name, const std::string& what, int err) {
  throw DataError(fmt::format("{}: {}: {}", name, what, spng_strerror(err)));
}

constexpr uint32_t kMaxSide = 1U << 15;

size_t channels(uint8_t color_type) {
  switch (color_type) {
    case SPNG_COLOR_TYPE_TRUECOLOR:
      return 3;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA:
      return 2;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA:
      return 4;
    default:
      return 1;  // gray, palette
  }
}

// A 16-bit PNG into a 16-bit image: gray samples as they are; gray+alpha and colour through
// RGBA16 and Pillow's luma weights at 16 bits (which give a gray sample back exactly).
void decode_16bit(spng_ctx* ctx, const spng_ihdr& ihdr, const std::string& name, GrayImage& out) {
  const size_t npix = static_cast<size_t>(ihdr.width) * ihdr.height;
  const bool gray = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE;
  const size_t channels = gray ? 2 : 4;  // SPNG_FMT_GA16 or SPNG_FMT_RGBA16, host order
  thread_local std::vector<uint16_t> decoded;
  decoded.resize(npix * channels);
  const int err = spng_decode_image(ctx, decoded.data(), decoded.size() * 2,
                                    gray ? SPNG_FMT_GA16 : SPNG_FMT_RGBA16, 0);
  if (err) fail(name, "corrupt or truncated PNG", err);
  out.bit_depth = 16;
  out.pixels.clear();
  out.pixels16.resize(npix);
  const uint16_t* p = decoded.data();
  for (size_t i = 0; i < npix; ++i, p += channels) {
    out.pixels16[i] = gray
                          ? p[0]
                          : static_cast<uint16_t>((p[0] * uint64_t{19595} + p[1] * uint64_t{38470} +
                                                   p[2] * uint64_t{7471} + 0x8000U) >>
                                                  16);
  }
}

}  // namespace

void decode_png_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out) {
  if (decode_png_gray_fast(data, size, out)) return;
  decode_png_gray_spng(data, size, name, out);
}

void decode_png_gray_spng(const uint8_t* data, size_t size, const std::string& name,
                          GrayImage& out) {
  if (size == 0) throw DataError(fmt::format("{}: empty file", name));
  SpngCtx ctx(spng_ctx_new(0));
  if (!ctx) throw DataError(fmt::format("{}: cannot create PNG decoder", name));
  spng_set_image_limits(ctx.get(), kMaxSide, kMaxSide);
  int err = spng_set_png_buffer(ctx.get(), data, size);
  if (err) fail(name, "not a PNG", err);
  spng_ihdr ihdr{};
  err = spng_get_ihdr(ctx.get(), &ihdr);
  if (err) fail(name, "not a valid PNG", err);
  const size_t npix = static_cast<size_t>(ihdr.width) * ihdr.height;
  // Deflate expands at most 1032:1: refuse before allocating for an image the file cannot hold.
  const size_t min_data_bytes = npix * channels(ihdr.color_type) * ihdr.bit_depth / 8;
  if (min_data_bytes / 1032 > size) {
    throw DataError(
        fmt::format("{}: corrupt or truncated PNG: a {}x{} image cannot fit in {} bytes", name,
                    ihdr.width, ihdr.height, size));
  }
  out.width = static_cast<int>(ihdr.width);
  out.height = static_cast<int>(ihdr.height);

  if (ihdr.bit_depth == 16) {
    decode_16bit(ctx.get(), ihdr, name, out);
    return;
  }
  out.bit_depth = 8;
  out.pixels16.clear();
  if (ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8) {
    out.pixels.resize(npix);
    err = spng_decode_image(ctx.get(), out.pixels.data(), npix, SPNG_FMT_G8, 0);
    if (err) fail(name, "corrupt or truncated PNG", err);
    return;
  }
  // Other variants: RGBA8 (alpha ignored), then luma; gray sources have R = G = B, so the luma
  // weights (summing to 65536) give the gray value back exactly.
  thread_local std::vector<uint8_t> rgba;
  rgba.resize(npix * 4);
  err = spng_decode_image(ctx.get(), rgba.data(), rgba.size(), SPNG_FMT_RGBA8, 0);
  if (err) fail(name, "corrupt or truncated PNG", err);
  out.pixels.resize(npix);
  const uint8_t* p = rgba.data();
  for (size_t i = 0; i < npix; ++i, p += 4) {
    out.pixels[i] =
        static_cast<uint8_t>((p[0] * 19595U + p[1] * 38470U + p[2] * 7471U + 0x8000U) >> 16);
  }
}

void read_file_bytes(const std::string& path, std::vector<uint8_t>& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw DataError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  }
  buffer.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = ::read(fd, buffer.data() + done, buffer.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw DataError(
          fmt::format("{}: read failed: {}", path, n < 0 ? std::strerror(errno) : "eof"));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

namespace {

std::string encode_png(const void* pixels, int width, int height, uint8_t color_type, int channels,
                       int bit_depth, int compression_level) {
  SpngCtx ctx(spng_ctx_new(SPNG_CTX_ENCODER));
  CHX_CHECK(ctx != nullptr, "spng_ctx_new failed");
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_set_option(ctx.get(), SPNG_IMG_COMPRESSION_LEVEL, compression_level);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(width);
  ihdr.height = static_cast<uint32_t>(height);
  ihdr.bit_depth = static_cast<uint8_t>(bit_depth);
  ihdr.color_type = color_type;
  spng_set_ihdr(ctx.get(), &ihdr);
  const size_t len = static_cast<size_t>(width) * height * channels * (bit_depth / 8);
  int err = spng_encode_image(ctx.get(), pixels, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  if (err) throw Error(fmt::format("PNG encoding failed: {}", spng_strerror(err)));
  size_t size = 0;
  void* buf = spng_get_png_buffer(ctx.get(), &size, &err);
  if (buf == nullptr) throw Error(fmt::format("PNG encoding failed: {}", spng_strerror(err)));
  std::string png(static_cast<const char*>(buf), size);
  std::free(buf);
  return png;
}

}  // namespace

std::string encode_png_gray(const uint8_t* pixels, int width, int height, int compression_level) {
  return encode_png(pixels, width, height, SPNG_COLOR_TYPE_GRAYSCALE, 1, 8, compression_level);
}

std::string encode_png_gray16(const uint16_t* pixels, int width, int height,
                              int compression_level) {
  // libspng takes 16-bit samples in host order and writes them big-endian.
  return encode_png(pixels, width, height, SPNG_COLOR_TYPE_GRAYSCALE, 1, 16, compression_level);
}

std::string encode_png_rgb(const uint8_t* pixels, int width, int height, int compression_level) {
  return encode_png(pixels, width, height, SPNG_COLOR_TYPE_TRUECOLOR, 3, 8, compression_level);
}

}  // namespace chexscale::data
