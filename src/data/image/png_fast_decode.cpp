// Fast PNG decode of 8- and 16-bit, non-interlaced gray, gray+alpha, RGB and RGBA (see
// png_fast_decode.h): chunk walk with CRC checks, one libdeflate inflate, own unfiltering, luma as
// the libspng path.
#include "data/image/png_fast_decode.h"

#include <libdeflate.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace chexscale::data {
namespace {

constexpr uint8_t kSignature[8] = {137, 80, 78, 71, 13, 10, 26, 10};
constexpr uint32_t kMaxSide = 1U << 15;           // the libspng path's image limits
constexpr uint32_t kMaxChunkLength = 0x7FFFFFFF;  // PNG's limit on a chunk's length
constexpr int kMaxAncillaryChunks = 64;           // more is unusual: leave it to libspng

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

bool is_letter(uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// The parts of a PNG the fast path needs, found by walking its chunks.
struct PngLayout {
  uint32_t width = 0;
  uint32_t height = 0;
  int bit_depth = 0;                                    // 8 or 16
  int channels = 0;                                     // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  std::vector<std::pair<const uint8_t*, size_t>> idat;  // the IDAT chunks' data, in order
};

// Checks IHDR's 13 bytes; false unless 8- or 16-bit, non-interlaced gray/GA/RGB/RGBA within the
// limits.
bool read_ihdr(const uint8_t* d, PngLayout& layout) {
  layout.width = read_be32(d);
  layout.height = read_be32(d + 4);
  layout.bit_depth = d[8];
  const uint8_t color_type = d[9];
  if (layout.width == 0 || layout.height == 0 || layout.width > kMaxSide ||
      layout.height > kMaxSide || (layout.bit_depth != 8 && layout.bit_depth != 16) || d[10] != 0 ||
      d[11] != 0 || d[12] != 0) {
    return false;
  }
  switch (color_type) {
    case 0:
      layout.channels = 1;
      return true;
    case 2:
      layout.channels = 3;
      return true;
    case 4:
      layout.channels = 2;
      return true;
    case 6:
      layout.channels = 4;
      return true;
    default:
      return false;
  }
}

// Walks the chunks from the signature to IEND, checking every CRC-32. Accepts IHDR first, one run
// of IDAT chunks, IEND and ancillary chunks between them; anything else is declined.
bool read_layout(const uint8_t* data, size_t size, PngLayout& layout) {
  if (size < sizeof(kSignature) || std::memcmp(data, kSignature, sizeof(kSignature)) != 0) {
    return false;
  }
  size_t pos = sizeof(kSignature);
  bool seen_ihdr = false;
  bool idat_ended = false;
  int ancillary = 0;
  while (true) {
    if (size - pos < 12) return false;  // length, type and CRC do not fit
    const uint32_t length = read_be32(data + pos);
    const uint8_t* type = data + pos + 4;
    if (length > kMaxChunkLength || size - pos - 12 < length) return false;
    if (!is_letter(type[0]) || !is_letter(type[1]) || !is_letter(type[2]) || !is_letter(type[3])) {
      return false;
    }
    const uint8_t* body = type + 4;
    if (libdeflate_crc32(0, type, length + 4) != read_be32(body + length)) return false;
    pos += 12 + static_cast<size_t>(length);

    const bool is_ihdr = std::memcmp(type, "IHDR", 4) == 0;
    if (seen_ihdr == is_ihdr) return false;  // IHDR must come first, and only once
    if (is_ihdr) {
      if (length != 13 || !read_ihdr(body, layout)) return false;
      seen_ihdr = true;
    } else if (std::memcmp(type, "IDAT", 4) == 0) {
      if (idat_ended) return false;  // IDAT chunks must be consecutive
      layout.idat.emplace_back(body, length);
    } else if (std::memcmp(type, "IEND", 4) == 0) {
      return length == 0 && !layout.idat.empty();
    } else if ((type[0] & 0x20) == 0) {
      return false;  // PLTE or an unknown critical chunk
    } else {
      if (++ancillary > kMaxAncillaryChunks) return false;
      idat_ended = !layout.idat.empty();
    }
  }
}

uint8_t paeth(int a, int b, int c) {
  const int pa = std::abs(b - c);
  const int pb = std::abs(a - c);
  const int pc = std::abs(a + b - 2 * c);
  if (pa <= pb && pa <= pc) return static_cast<uint8_t>(a);
  return static_cast<uint8_t>(pb <= pc ? b : c);
}

// Undoes one row's filter: `out` gets the row from its filtered bytes `in` and the row above,
// `prior` (zeros for the first row). `Bpp` bytes a pixel. False for an unknown filter type.
template <int Bpp>
bool unfilter_row(uint8_t filter, const uint8_t* __restrict in, uint8_t* __restrict out,
                  const uint8_t* __restrict prior, size_t n) {
  switch (filter) {
    case 0:
      std::memcpy(out, in, n);
      return true;
    case 1:
      for (size_t i = 0; i < Bpp; ++i)
        out[i] = in[i];
      for (size_t i = Bpp; i < n; ++i)
        out[i] = static_cast<uint8_t>(in[i] + out[i - Bpp]);
      return true;
    case 2:
      for (size_t i = 0; i < n; ++i)
        out[i] = static_cast<uint8_t>(in[i] + prior[i]);
      return true;
    case 3:
      for (size_t i = 0; i < Bpp; ++i)
        out[i] = static_cast<uint8_t>(in[i] + (prior[i] >> 1));
      for (size_t i = Bpp; i < n; ++i)
        out[i] = static_cast<uint8_t>(in[i] + ((out[i - Bpp] + prior[i]) >> 1));
      return true;
    case 4:
      for (size_t i = 0; i < Bpp; ++i)
        out[i] = static_cast<uint8_t>(in[i] + prior[i]);  // Paeth with a = c = 0 is b
      for (size_t i = Bpp; i < n; ++i)
        out[i] = static_cast<uint8_t>(in[i] + paeth(out[i - Bpp], prior[i], prior[i - Bpp]));
      return true;
    default:
      return false;
  }
}

// Pillow's luma of R, G, B (8- or 16-bit), as the libspng path computes it; the weights sum to
// 65536, so R = G = B gives that value back.
template <typename Sample>
Sample luma(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<Sample>((r * 19595U + g * 38470U + b * 7471U + 0x8000U) >> 16);
}

// The sample at `p`: one byte, or two bytes big-endian (PNG's order).
template <typename Sample>
uint32_t sample_at(const uint8_t* p) {
  if constexpr (sizeof(Sample) == 1) {
    return p[0];
  } else {
    return (uint32_t{p[0]} << 8) | p[1];
  }
}

// Unfilters `raw` (height rows of a filter byte and width * Channels samples) into the gray
// output, Sample (uint8_t or uint16_t) a sample. 8-bit gray rows are unfiltered in place in the
// output; other layouts go through two row buffers and are converted a row at a time (16-bit
// samples to host order; colour to luma; gray+alpha to its gray sample).
template <typename Sample, int Channels>
bool unfilter_image(const uint8_t* raw, uint32_t width, uint32_t height, Sample* gray) {
  constexpr int kBpp = Channels * static_cast<int>(sizeof(Sample));  // bytes a pixel
  constexpr bool kInPlace = kBpp == 1;
  const size_t n = static_cast<size_t>(width) * kBpp;
  thread_local std::vector<uint8_t> rows;
  rows.assign(kInPlace ? n : 3 * n, 0);  // [zeros][current][previous] when converted
  uint8_t* zeros = rows.data();
  uint8_t* cur = rows.data() + n;
  uint8_t* prev = zeros;
  for (uint32_t y = 0; y < height; ++y, raw += n + 1) {
    Sample* g = gray + static_cast<size_t>(y) * width;
    uint8_t* out = kInPlace ? reinterpret_cast<uint8_t*>(g) : cur;
    if (!unfilter_row<kBpp>(raw[0], raw + 1, out, prev, n)) return false;
    if constexpr (kInPlace) {
      prev = out;
    } else {
      constexpr int kStep = static_cast<int>(sizeof(Sample));
      for (uint32_t x = 0; x < width; ++x) {
        const uint8_t* p = out + static_cast<size_t>(x) * kBpp;
        if constexpr (Channels <= 2) {
          g[x] = static_cast<Sample>(sample_at<Sample>(p));  // gray (+alpha): the gray sample
        } else {
          g[x] = luma<Sample>(sample_at<Sample>(p), sample_at<Sample>(p + kStep),
                              sample_at<Sample>(p + 2 * kStep));
        }
      }
      prev = cur;
      cur = cur == rows.data() + n ? rows.data() + 2 * n : rows.data() + n;
    }
  }
  return true;
}

template <typename Sample>
bool unfilter_any(const uint8_t* raw, const PngLayout& layout, Sample* gray) {
  switch (layout.channels) {
    case 1:
      return unfilter_image<Sample, 1>(raw, layout.width, layout.height, gray);
    case 2:
      return unfilter_image<Sample, 2>(raw, layout.width, layout.height, gray);
    case 3:
      return unfilter_image<Sample, 3>(raw, layout.width, layout.height, gray);
    default:
      return unfilter_image<Sample, 4>(raw, layout.width, layout.height, gray);
  }
}

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

}  // namespace

bool decode_png_gray_fast(const uint8_t* data, size_t size, GrayImage& out) {
  PngLayout layout;
  if (!read_layout(data, size, layout)) return false;
  const size_t row_bytes =
      static_cast<size_t>(layout.width) * layout.channels * (layout.bit_depth / 8) + 1;
  const size_t raw_size = row_bytes * layout.height;
  // Deflate expands at most 1032:1; a bigger claim is a corrupt or truncated file.
  if (raw_size / 1032 > size) return false;

  const uint8_t* zlib = layout.idat[0].first;
  size_t zlib_size = layout.idat[0].second;
  thread_local std::vector<uint8_t> joined;
  if (layout.idat.size() > 1) {
    joined.clear();
    for (const auto& [p, n] : layout.idat)
      joined.insert(joined.end(), p, p + n);
    zlib = joined.data();
    zlib_size = joined.size();
  }
  thread_local std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> inflater(
      libdeflate_alloc_decompressor());
  if (!inflater) return false;
  thread_local std::vector<uint8_t> raw;
  raw.resize(raw_size);
  // Exactly raw_size bytes from exactly the IDAT data, else declined (short, long or trailing
  // data); libdeflate checks the zlib header and the Adler-32.
  size_t consumed = 0;
  if (libdeflate_zlib_decompress_ex(inflater.get(), zlib, zlib_size, raw.data(), raw_size,
                                    &consumed, nullptr) != LIBDEFLATE_SUCCESS ||
      consumed != zlib_size) {
    return false;
  }
  out.width = static_cast<int>(layout.width);
  out.height = static_cast<int>(layout.height);
  out.bit_depth = layout.bit_depth;
  const size_t npix = static_cast<size_t>(layout.width) * layout.height;
  if (layout.bit_depth == 16) {
    out.pixels.clear();
    out.pixels16.resize(npix);
    return unfilter_any(raw.data(), layout, out.pixels16.data());
  }
  out.pixels16.clear();
  out.pixels.resize(npix);
  return unfilter_any(raw.data(), layout, out.pixels.data());
}

}  // namespace chexscale::data
