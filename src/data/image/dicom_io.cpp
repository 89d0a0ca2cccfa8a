// DICOM decoding to gray with DCMTK's DicomImage, and writing with its codecs (see dicom_io.h).
#include "data/image/dicom_io.h"

#include <sys/mman.h>
#include <unistd.h>

#include <dcmtk/config/osconfig.h>  // first, as DCMTK requires

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcrledrg.h>
#include <dcmtk/dcmdata/dcrleerg.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmimgle/dcmimage.h>
#include <dcmtk/dcmjpeg/djdecode.h>
#include <dcmtk/dcmjpeg/djencode.h>
#include <dcmtk/dcmjpeg/djrplol.h>
#include <dcmtk/dcmjpeg/djrploss.h>
#include <dcmtk/dcmjpls/djdecode.h>
#include <dcmtk/dcmjpls/djencode.h>
#include <dcmtk/oflog/oflog.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/enum_parse.h"
#include "common/error.h"

namespace chexscale::data {
namespace {

constexpr Uint16 kMaxSide = 1U << 15;
// Compressed pixel data: lossless JPEG/JPEG-LS/RLE of a flat image can reach a few hundred
// pixels a byte; a header claiming more than this per byte of file is corrupt.
constexpr uint64_t kMaxPixelsPerByte = 4096;

// DCMTK's decoders and encoders registered once, its logging silenced (errors are reported
// here, naming the file).
void init_dcmtk() {
  static std::once_flag once;
  std::call_once(once, [] {
    OFLog::configure(OFLogger::OFF_LOG_LEVEL);
    DJDecoderRegistration::registerCodecs();
    DJLSDecoderRegistration::registerCodecs();
    DcmRLEDecoderRegistration::registerCodecs();
    DJEncoderRegistration::registerCodecs();
    DJLSEncoderRegistration::registerCodecs();
    DcmRLEEncoderRegistration::registerCodecs();
  });
}

Uint16 required_uint16(DcmDataset& ds, const DcmTagKey& tag, const char* what,
                       const std::string& name) {
  Uint16 v = 0;
  if (ds.findAndGetUint16(tag, v).bad()) {
    throw DataError(fmt::format("{}: DICOM without {}", name, what));
  }
  return v;
}

// The header's image description, checked before DCMTK allocates anything for the pixels.
struct DicomLayout {
  Uint16 rows = 0;
  Uint16 columns = 0;
  Uint16 bits_stored = 0;
};

DicomLayout check_layout(DcmDataset& ds, size_t file_size, const std::string& name) {
  DicomLayout l;
  l.rows = required_uint16(ds, DCM_Rows, "Rows", name);
  l.columns = required_uint16(ds, DCM_Columns, "Columns", name);
  const Uint16 allocated = required_uint16(ds, DCM_BitsAllocated, "Bits Allocated", name);
  l.bits_stored = required_uint16(ds, DCM_BitsStored, "Bits Stored", name);
  Uint16 samples = 1;
  ds.findAndGetUint16(DCM_SamplesPerPixel, samples);
  OFString photometric;
  ds.findAndGetOFString(DCM_PhotometricInterpretation, photometric);
  if (samples != 1 || (photometric != "MONOCHROME1" && photometric != "MONOCHROME2")) {
    throw DataError(fmt::format("{}: DICOM {} with {} samples a pixel, not a monochrome X-ray",
                                name, photometric.c_str(), samples));
  }
  if (l.rows == 0 || l.columns == 0 || l.rows > kMaxSide || l.columns > kMaxSide) {
    throw DataError(fmt::format("{}: DICOM of {}x{} pixels (at most {} a side)", name, l.columns,
                                l.rows, kMaxSide));
  }
  if (l.bits_stored == 0 || l.bits_stored > 16 || allocated < l.bits_stored || allocated > 16) {
    throw DataError(fmt::format("{}: DICOM with {} bits stored in {} allocated (1-16 supported)",
                                name, l.bits_stored, allocated));
  }
  DcmElement* pixel_data = nullptr;
  if (ds.findAndGetElement(DCM_PixelData, pixel_data).bad() || pixel_data == nullptr) {
    throw DataError(fmt::format("{}: DICOM without Pixel Data", name));
  }
  const uint64_t npix = uint64_t{l.rows} * l.columns;
  if (DcmXfer(ds.getOriginalXfer()).isEncapsulated()) {
    if (npix / kMaxPixelsPerByte > file_size) {
      throw DataError(fmt::format("{}: corrupt DICOM: {}x{} pixels cannot fit in {} bytes", name,
                                  l.columns, l.rows, file_size));
    }
  } else if (pixel_data->getLength() < (npix * allocated + 7) / 8) {
    throw DataError(fmt::format("{}: truncated DICOM: {} bytes of Pixel Data for {}x{}x{} bits",
                                name, pixel_data->getLength(), l.columns, l.rows, allocated));
  }
  return l;
}

// The bytes as an anonymous in-memory file (memfd), named by /proc/self/fd/N.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size, const std::string& name)
      : fd_(::memfd_create("chexscale-dicom", MFD_CLOEXEC)) {
    if (fd_ < 0) throw DataError(fmt::format("{}: cannot buffer the DICOM file", name));
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) {
        ::close(fd_);
        throw DataError(fmt::format("{}: cannot buffer the DICOM file", name));
      }
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { ::close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::string path() const { return fmt::format("/proc/self/fd/{}", fd_); }

 private:
  int fd_;
};

E_TransferSyntax transfer_syntax(DicomCompression c) {
  switch (c) {
    case DicomCompression::kRle:
      return EXS_RLELossless;
    case DicomCompression::kJpegLossless:
      return EXS_JPEGProcess14SV1;
    case DicomCompression::kJpegLs:
      return EXS_JPEGLSLossless;
    case DicomCompression::kJpegBaseline:
      return EXS_JPEGProcess1;
    default:
      return EXS_LittleEndianExplicit;
  }
}

// Compresses the dataset's Pixel Data to `xfer` with the encoder's parameters.
void compress(DcmDataset& ds, DicomCompression c, const std::string& path) {
  const E_TransferSyntax xfer = transfer_syntax(c);
  const DJ_RPLossless jpeg_lossless(/*prediction=*/1, /*pt=*/0);
  const DJ_RPLossy jpeg_baseline(kDicomJpegBaselineQuality);
  const DcmRepresentationParameter* params = nullptr;
  if (c == DicomCompression::kJpegLossless) params = &jpeg_lossless;
  if (c == DicomCompression::kJpegBaseline) params = &jpeg_baseline;
  const OFCondition done = ds.chooseRepresentation(xfer, params);
  if (done.bad() || !ds.canWriteXfer(xfer)) {
    throw Error(fmt::format("{}: cannot compress DICOM pixel data to {}: {}", path,
                            DcmXfer(xfer).getXferName(), done.text()));
  }
}

}  // namespace

const char* to_string(DicomCompression compression) {
  switch (compression) {
    case DicomCompression::kNone:
      return "none";
    case DicomCompression::kRle:
      return "rle";
    case DicomCompression::kJpegLossless:
      return "jpeg-lossless";
    case DicomCompression::kJpegLs:
      return "jpeg-ls";
    default:
      return "jpeg-baseline";
  }
}

DicomCompression parse_dicom_compression(const std::string& name) {
  return parse_enum(
      name, "dicom_compression",
      {DicomCompression::kNone, DicomCompression::kRle, DicomCompression::kJpegLossless,
       DicomCompression::kJpegLs, DicomCompression::kJpegBaseline});
}

void decode_dicom_gray(const uint8_t* data, size_t size, const std::string& name, GrayImage& out) {
  init_dcmtk();
  if (size < 132 || std::memcmp(data + 128, "DICM", 4) != 0) {
    throw DataError(fmt::format("{}: not a DICOM file (no \"DICM\" at byte 128)", name));
  }
  // Read from a file, not from memory: DCMTK checks a file's remaining bytes before taking an
  // element's declared length, and defers large values; from a memory buffer it allocates
  // whatever length an element claims (hostile files ask for gigabytes).
  const MemoryFile copy(data, size, name);
  DcmFileFormat file;
  const OFCondition read = file.loadFile(copy.path().c_str(), EXS_Unknown, EGL_noChange);
  if (read.bad()) {
    throw DataError(fmt::format("{}: corrupt or truncated DICOM: {}", name, read.text()));
  }
  DcmDataset& ds = *file.getDataset();
  const DicomLayout layout = check_layout(ds, size, name);

  DicomImage image(&file, ds.getOriginalXfer(), CIF_MayDetachPixelData, 0, 1);
  if (image.getStatus() != EIS_Normal) {
    throw DataError(fmt::format("{}: DICOM pixel data not decodable: {}", name,
                                DicomImage::getString(image.getStatus())));
  }
  if (image.getVoiLutCount() > 0) {
    image.setVoiLut(0);
  } else if (image.getWindowCount() > 0) {
    image.setWindow(0);
  } else {
    image.setNoVoiTransformation();
  }
  const int bits = layout.bits_stored > 8 ? layout.bits_stored : 8;
  const void* rendered = image.getOutputData(bits, 0, 0);
  if (rendered == nullptr) {
    throw DataError(fmt::format("{}: DICOM pixel data not decodable: {}", name,
                                DicomImage::getString(image.getStatus())));
  }
  const auto width = static_cast<int>(image.getWidth());
  const auto height = static_cast<int>(image.getHeight());
  const size_t npix = static_cast<size_t>(width) * height;
  out.width = width;
  out.height = height;
  out.bit_depth = bits;
  if (bits > 8) {
    out.pixels.clear();
    out.pixels16.resize(npix);
    std::memcpy(out.pixels16.data(), rendered, npix * sizeof(uint16_t));
  } else {
    out.pixels16.clear();
    out.pixels.resize(npix);
    std::memcpy(out.pixels.data(), rendered, npix);
  }
}

namespace {

// The elements of an X-ray image of `width` x `height` samples, without its pixel data.
void put_image_elements(DcmDataset& ds, int width, int height, int allocated,
                        const DicomWriteOptions& o) {
  char uid[100];
  const auto put = [&](const DcmTagKey& tag, const std::string& value) {
    CHX_CHECK(ds.putAndInsertString(tag, value.c_str()).good(), "DICOM element {}",
              DcmTag(tag).getTagName());
  };
  const auto put16 = [&](const DcmTagKey& tag, int value) {
    CHX_CHECK(ds.putAndInsertUint16(tag, static_cast<Uint16>(value)).good(), "DICOM element {}",
              DcmTag(tag).getTagName());
  };
  put(DCM_SOPClassUID, UID_DigitalXRayImageStorageForPresentation);
  put(DCM_SOPInstanceUID, dcmGenerateUniqueIdentifier(uid, SITE_INSTANCE_UID_ROOT));
  put(DCM_StudyInstanceUID, dcmGenerateUniqueIdentifier(uid, SITE_STUDY_UID_ROOT));
  put(DCM_SeriesInstanceUID, dcmGenerateUniqueIdentifier(uid, SITE_SERIES_UID_ROOT));
  put(DCM_Modality, "DX");
  put(DCM_PatientID, o.patient_id);
  put16(DCM_SamplesPerPixel, 1);
  put(DCM_PhotometricInterpretation, o.monochrome1 ? "MONOCHROME1" : "MONOCHROME2");
  put16(DCM_Rows, height);
  put16(DCM_Columns, width);
  put16(DCM_BitsAllocated, allocated);
  put16(DCM_BitsStored, o.bits_stored);
  put16(DCM_HighBit, o.bits_stored - 1);
  put16(DCM_PixelRepresentation, 0);
  put(DCM_RescaleSlope, fmt::format("{:g}", o.rescale_slope));
  put(DCM_RescaleIntercept, fmt::format("{:g}", o.rescale_intercept));
  put(DCM_RescaleType, "US");
  if (o.window_width > 0) {
    put(DCM_WindowCenter, fmt::format("{:g}", o.window_center));
    put(DCM_WindowWidth, fmt::format("{:g}", o.window_width));
  }
}

}  // namespace

void write_dicom_gray(const std::string& path, const uint16_t* stored, int width, int height,
                      const DicomWriteOptions& o) {
  init_dcmtk();
  CHX_CHECK(o.bits_stored >= 8 && o.bits_stored <= 16, "bits stored {}", o.bits_stored);
  if (o.compression == DicomCompression::kJpegBaseline && o.bits_stored != 8) {
    throw Error(
        fmt::format("{}: JPEG baseline DICOM holds 8 bits stored, not {}", path, o.bits_stored));
  }
  const int allocated = o.bits_stored == 8 ? 8 : 16;
  CHX_CHECK(width > 0 && height > 0 && width <= kMaxSide && height <= kMaxSide, "DICOM {}x{}",
            width, height);
  DcmFileFormat file;
  DcmDataset* ds = file.getDataset();
  put_image_elements(*ds, width, height, allocated, o);
  const size_t npix = static_cast<size_t>(width) * height;
  for (size_t i = 0; i < npix; ++i) {
    CHX_CHECK(stored[i] <= max_sample(o.bits_stored), "stored value {} over {} bits", stored[i],
              o.bits_stored);
  }
  if (allocated == 8) {
    const std::vector<Uint8> bytes(stored, stored + npix);
    CHX_CHECK(
        ds->putAndInsertUint8Array(DCM_PixelData, bytes.data(), static_cast<unsigned long>(npix))
            .good(),
        "DICOM Pixel Data");
  } else {
    CHX_CHECK(
        ds->putAndInsertUint16Array(DCM_PixelData, stored, static_cast<unsigned long>(npix)).good(),
        "DICOM Pixel Data");
  }
  if (o.compression != DicomCompression::kNone) compress(*ds, o.compression, path);
  const OFCondition saved = file.saveFile(path.c_str(), transfer_syntax(o.compression));
  if (saved.bad()) throw Error(fmt::format("{}: cannot write DICOM: {}", path, saved.text()));
}

}  // namespace chexscale::data
