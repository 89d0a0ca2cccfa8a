// The data folder a source is read from: a missing path or a file is named as such. A folder of
// JPEGs is decoded for the source's image size (the reduced DCT scale), then resized.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/example_source.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "data/loader.h"
#include "data/synthetic/synthetic.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

// --data given a missing path or a file: the error says which.
TEST(DataFolder, MissingOrAFileIsNamedAsSuch) {
  test_util::TempDir dir;
  const std::string file = dir.write("Data_Entry_2017.csv", "Image Index\n");
  const auto message = [](const std::string& path) {
    try {
      require_data_folder(path);
    } catch (const DataError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(dir.path()), "no error");
  EXPECT_NE(message(dir.path() + "/none").find("no such data folder"), std::string::npos);
  EXPECT_NE(message(file).find("a file, not a data folder"), std::string::npos) << message(file);
}

// CheXpert's layout is JPEG: a 128-pixel image for a source of 32 decodes at 1/4 and is then
// resized (here: copied), as decode_image(..., 32) and resize_gray give it.
TEST(LooseSource, JpegsDecodeAtTheScaleOfTheImageSize) {
  test_util::TempDir dir;
  SynthOptions synth;
  synth.out_dir = dir.path() + "/chexpert";
  synth.dataset = DatasetKind::kChexpert;
  synth.images = 6;
  synth.image_size = 128;
  synth.threads = 1;
  write_synthetic_dataset(synth);
  LoaderOptions o;
  o.source = synth.out_dir;
  o.image_size = 32;
  o.crop_size = 32;
  const auto source = open_example_source(o);
  ASSERT_GT(source->size(), 0);
  ImageScratch scratch;
  const GrayView view = source->image(0, scratch);
  ASSERT_EQ(view.width, 32);
  ASSERT_EQ(view.height, 32);
  EXPECT_EQ(scratch.decoded.width, 32);  // decoded at 1/4, not at 128

  GrayImage decoded;
  GrayImage expected;
  std::vector<uint8_t> file;
  read_image(synth.out_dir + "/" + source->name(0), decoded, file, 32);
  resize_gray(decoded, 32, 32, expected);
  EXPECT_EQ(std::vector<uint8_t>(view.pixels, view.pixels + 32 * 32), expected.pixels);
}

}  // namespace
}  // namespace chexscale::data
