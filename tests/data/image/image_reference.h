// Runs tests/data/image/image_reference.py (Pillow for PNG/JPEG, pydicom for DICOM, with
// /usr/bin/python3) on image files and parses its pixels: the independent references the decoder
// tests compare chexscale's decoders with.
#pragma once

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "test_util/chexscale_cli.h"
#include "test_util/process.h"

namespace chexscale::data {

struct ReferenceImage {
  int width = 0;
  int height = 0;
  int bit_depth = 0;
  std::vector<int> pixels;
  std::string error;  // set when the reference could not read the file
};

// `jpeg_draft` > 0: JPEGs decoded with Pillow's draft("L", (jpeg_draft, jpeg_draft)), the DCT
// scaling chexscale's decode_image(..., resize_to = jpeg_draft) does.
inline std::vector<ReferenceImage> reference_decode(const std::vector<std::string>& paths,
                                                    int jpeg_draft = 0) {
  std::string command =
      "/usr/bin/python3 '" + test_util::source_dir() + "/tests/data/image/image_reference.py'";
  if (jpeg_draft > 0) command += " --draft=" + std::to_string(jpeg_draft);
  for (const auto& p : paths)
    command += " '" + p + "'";
  const test_util::ProcessResult r = test_util::run_shell(command);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<ReferenceImage> images;
  std::istringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    ReferenceImage img;
    if (line.rfind("error ", 0) == 0) {
      img.error = line.substr(6);
    } else {
      std::istringstream in(line);
      in >> img.width >> img.height >> img.bit_depth;
      int v = 0;
      while (in >> v)
        img.pixels.push_back(v);
    }
    images.push_back(std::move(img));
  }
  EXPECT_EQ(images.size(), paths.size()) << r.output;
  images.resize(paths.size());
  return images;
}

}  // namespace chexscale::data
