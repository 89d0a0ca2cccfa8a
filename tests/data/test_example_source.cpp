// The data folder a source is read from: a missing path or a file is named as such.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/example_source.h"
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

}  // namespace
}  // namespace chexscale::data
