// TurboJPEG decoding to gray and encoding (see jpeg_io.h).
#include "data/image/jpeg_io.h"

#include <fmt/format.h>
#include <turbojpeg.h>

#include <algorithm>
#include <memory>

#include "common/error.h"

namespace chexscale::data {
namespace {

constexpr int kMaxSide = 1 << 15;
// Each 8x8 block takes at least a couple of bits (more in real images, ~10:1 compression at
// most for X-rays); progressive end-of-band runs can code many blocks in a few bits, so the bound
// is generous. A header claiming more pixels than this per byte of file is corrupt.
constexpr uint64_t kMaxPixelsPerByte = 4096;
// Below this many pixels a side, two of TurboJPEG's scaling factors (k/8) can give the same
// scaled size and it might pick another than the one asked for: smaller targets decode in full.
constexpr int kMinScaledSide = 8;

struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjDeleter>;

// One decompressor per thread (a TurboJPEG handle is not shareable between threads), made anew
// after a failed decode: libjpeg's state after an error is not fit to read the next file.
TjHandle& decompressor() {
  thread_local TjHandle handle;
  if (!handle) handle.reset(tjInitDecompress());
  return handle;
}

[[noreturn]] void fail(TjHandle& tj, const std::string& message) {
  const std::string what = fmt::format("{}: {}", message, tjGetErrorStr2(tj.get()));
  tj.reset();
  throw DataError(what);
}

// The DCT scale denominator (1, 2, 4 or 8) for an image of width x height to be resized to
// `resize_to` a side: the largest with denominator * resize_to <= both sides (Pillow's draft()).
int scale_denominator(int width, int height, int resize_to) {
  if (resize_to < kMinScaledSide) return 1;
  for (int denominator : {8, 4, 2}) {
    if (static_cast<int64_t>(denominator) * resize_to <= std::min(width, height))
      return denominator;
  }
  return 1;
}

}  // namespace

void decode_jpeg_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out,
                      int resize_to) {
  if (size == 0) throw DataError(fmt::format("{}: empty file", name));
  TjHandle& handle = decompressor();
  if (!handle) throw DataError(fmt::format("{}: cannot create a JPEG decoder", name));
  tjhandle tj = handle.get();
  int width = 0;
  int height = 0;
  int subsampling = 0;
  int colorspace = 0;
  if (tjDecompressHeader3(tj, data, static_cast<unsigned long>(size), &width, &height, &subsampling,
                          &colorspace) != 0) {
    fail(handle, fmt::format("{}: not a valid JPEG", name));
  }
  if (width <= 0 || height <= 0) {
    throw DataError(fmt::format("{}: not a valid JPEG: no image size in its header", name));
  }
  if (width > kMaxSide || height > kMaxSide) {
    throw DataError(fmt::format("{}: JPEG of {}x{} pixels, more than {} a side", name, width,
                                height, kMaxSide));
  }
  const uint64_t npix = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);
  if (npix / kMaxPixelsPerByte > size) {
    throw DataError(
        fmt::format("{}: corrupt or truncated JPEG: a {}x{} image cannot fit in {} bytes", name,
                    width, height, size));
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    throw DataError(fmt::format("{}: CMYK JPEG, not a gray or colour X-ray", name));
  }
  // TurboJPEG picks the largest of its scaling factors that fits the size asked for: asking for
  // the size at 1/denominator gets exactly that factor (see kMinScaledSide).
  const tjscalingfactor factor{1, scale_denominator(width, height, resize_to)};
  out.width = TJSCALED(width, factor);
  out.height = TJSCALED(height, factor);
  out.bit_depth = 8;
  out.pixels16.clear();
  out.pixels.resize(static_cast<size_t>(out.width) * static_cast<size_t>(out.height));
  // TJPF_GRAY: the luminance of a colour JPEG, the samples of a gray one. Warnings (premature
  // end of data, corrupt data) stop the decode and are reported.
  if (tjDecompress2(tj, data, static_cast<unsigned long>(size), out.pixels.data(), out.width,
                    out.width, out.height, TJPF_GRAY, TJFLAG_STOPONWARNING) != 0) {
    fail(handle, fmt::format("{}: corrupt or truncated JPEG", name));
  }
}

namespace {

std::string encode_jpeg(const uint8_t* pixels, int width, int height, int pixel_format,
                        int subsampling, int quality) {
  CHX_CHECK(quality >= 1 && quality <= 100, "JPEG quality {} not in [1, 100]", quality);
  const TjHandle tj(tjInitCompress());
  CHX_CHECK(tj != nullptr, "tjInitCompress failed");
  unsigned char* jpeg = nullptr;
  unsigned long jpeg_size = 0;
  const int channels = pixel_format == TJPF_GRAY ? 1 : 3;
  if (tjCompress2(tj.get(), pixels, width, width * channels, height, pixel_format, &jpeg,
                  &jpeg_size, subsampling, quality, 0) != 0) {
    const std::string why = tjGetErrorStr2(tj.get());
    tjFree(jpeg);
    throw Error(fmt::format("JPEG encoding failed: {}", why));
  }
  std::string out(reinterpret_cast<const char*>(jpeg), jpeg_size);
  tjFree(jpeg);
  return out;
}

}  // namespace

std::string encode_jpeg_gray(const uint8_t* pixels, int width, int height, int quality) {
  return encode_jpeg(pixels, width, height, TJPF_GRAY, TJSAMP_GRAY, quality);
}

std::string encode_jpeg_rgb(const uint8_t* pixels, int width, int height, int quality) {
  return encode_jpeg(pixels, width, height, TJPF_RGB, TJSAMP_420, quality);
}

}  // namespace chexscale::data
