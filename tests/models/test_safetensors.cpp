// safetensors: round trips for every dtype, the byte layout the specification defines, files
// written by hand, and every kind of malformed or hostile input (a DataError with a clear message).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <random>

#include "common/error.h"
#include "models/safetensors.h"
#include "test_util/temp_dir.h"

namespace chexscale::models {
namespace {

// A file from a header text and data bytes, laid out by hand: u64 little-endian length first.
std::string file_of(const std::string& header, const std::string& data = "") {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

TensorFile parse(const std::string& bytes) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// Expects a DataError whose message contains `needle`.
void expect_data_error(const std::string& bytes, const std::string& needle) {
  try {
    parse(bytes);
    ADD_FAILURE() << "no error, expected one containing: " << needle;
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

TEST(Safetensors, RoundTripEveryDtype) {
  torch::manual_seed(0);
  const std::vector<NamedTensor> tensors = {
      {"f64", torch::randn({3, 2}, torch::kFloat64)},
      {"f32", torch::randn({4, 1, 3})},
      {"f16", torch::randn({5}).to(torch::kFloat16)},
      {"bf16", torch::randn({2, 3}).to(torch::kBFloat16)},
      {"i64", torch::randint(-1000000, 1000000, {4}, torch::kInt64)},
      {"i32", torch::randint(-1000, 1000, {2, 2}, torch::kInt32)},
      {"i16", torch::randint(-1000, 1000, {3}, torch::kInt16)},
      {"i8", torch::randint(-100, 100, {3}, torch::kInt8)},
      {"u8", torch::randint(0, 255, {7}, torch::kUInt8)},
      {"bool", torch::randint(0, 2, {5}).to(torch::kBool)},
      {"scalar", torch::tensor(42, torch::kInt64).reshape({})},
      {"empty", torch::zeros({0, 3})},
      {"strided", torch::randn({4, 6}).t()},  // non-contiguous input
  };
  test_util::TempDir dir;
  const std::string path = dir.path() + "/all.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "hello"}});
  const TensorFile back = read_safetensors(path);
  ASSERT_EQ(back.tensors.size(), tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(back.tensors[i].name, tensors[i].name);  // order kept
    EXPECT_EQ(back.tensors[i].tensor.scalar_type(), tensors[i].tensor.scalar_type());
    EXPECT_EQ(back.tensors[i].tensor.sizes(), tensors[i].tensor.sizes());
    EXPECT_TRUE(torch::equal(back.tensors[i].tensor, tensors[i].tensor));
  }
  EXPECT_EQ(back.metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hello"}}));
}

// The layout the specification prescribes, checked byte by byte.
TEST(Safetensors, WritesTheSpecifiedLayout) {
  const std::string bytes = serialize_safetensors(
      {{"a", torch::tensor({1.0f, -2.0f})}, {"b", torch::tensor({int64_t{258}})}});
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  ASSERT_EQ(bytes.size(), 8 + n + 8 + 8);
  EXPECT_EQ((8 + n) % 8, 0u);  // data starts 8-byte aligned
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(header["a"]["dtype"], "F32");
  EXPECT_EQ(header["a"]["shape"], nlohmann::json::array({2}));
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json::array({0, 8}));
  EXPECT_EQ(header["b"]["dtype"], "I64");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json::array({8, 16}));
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000, 258 = 0x102, all little-endian.
  const std::string data = bytes.substr(8 + n);
  EXPECT_EQ(data,
            std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x02\x01\x00\x00\x00\x00\x00\x00", 16));
}

TEST(Safetensors, ReadsAHandWrittenFileOfHalfFloats) {
  // F16 1.0 = 0x3c00, -2.0 = 0xc000; BF16 1.0 = 0x3f80, 0.5 = 0x3f00; header padded with spaces.
  const std::string header = "{" + entry("h", "F16", "[2]", "[0,4]") + "," +
                             entry("b", "BF16", "[1,2]", "[4,8]") +
                             ",\"__metadata__\":{\"k\":\"v\"}}   ";
  const TensorFile file =
      parse(file_of(header, std::string("\x00\x3c\x00\xc0\x80\x3f\x00\x3f", 8)));
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors[0].name, "h");
  EXPECT_TRUE(torch::equal(file.tensors[0].tensor, torch::tensor({1.0, -2.0}).to(torch::kFloat16)));
  EXPECT_EQ(file.tensors[1].name, "b");
  EXPECT_TRUE(
      torch::equal(file.tensors[1].tensor, torch::tensor({{1.0, 0.5}}).to(torch::kBFloat16)));
  EXPECT_EQ(file.metadata.at("k"), "v");
}

TEST(Safetensors, EmptyFileWithNoTensorsIsValid) {
  EXPECT_TRUE(parse(file_of("{}")).tensors.empty());
}

TEST(Safetensors, TruncatedOrShortFiles) {
  expect_data_error("", "too short");
  expect_data_error("\x10\x00\x00", "too short");
  expect_data_error(file_of("{}").substr(0, 7), "too short");
  std::string past_end = file_of("{}");
  past_end[0] = 40;  // claims 40 header bytes, file has 2
  expect_data_error(past_end, "runs past the end of the file");
  std::string huge(8, '\xff');
  expect_data_error(huge, "exceeds the 100 MB limit");
  // Every prefix of a valid file is an error, never a crash or a read past the end.
  const std::string valid =
      serialize_safetensors({{"w", torch::randn({3, 3})}, {"b", torch::randn({3})}});
  for (std::size_t len = 0; len < valid.size(); ++len) {
    EXPECT_THROW(parse(valid.substr(0, len)), DataError) << "prefix of " << len << " bytes";
  }
  EXPECT_EQ(parse(valid).tensors.size(), 2u);
}

TEST(Safetensors, BadJson) {
  expect_data_error(file_of("{\"a\":"), "not valid JSON");
  expect_data_error(file_of("[1,2]"), "does not start with '{'");
  expect_data_error(file_of(""), "does not start with '{'");
  expect_data_error(file_of("{\"a\":{}} trailing"), "not valid JSON");
  expect_data_error(file_of("{\"\xff\":{}}"), "not valid JSON");  // invalid UTF-8
  expect_data_error(
      file_of("{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"),
      "nests deeper");
}

TEST(Safetensors, MalformedEntries) {
  expect_data_error(file_of("{\"w\":5}"), "tensor 'w': entry is not an object");
  expect_data_error(file_of("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}"),
                    "tensor 'w': missing field 'data_offsets'");
  expect_data_error(file_of("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                            "\"extra\":1}}",
                            std::string(4, '\0')),
                    "tensor 'w': unexpected field 'extra'");
  expect_data_error(file_of("{" + entry("w", "F8_E4M3", "[1]", "[0,1]") + "}", "x"),
                    "tensor 'w': unsupported dtype 'F8_E4M3'");
  expect_data_error(file_of("{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}"),
                    "dtype is not a string");
  expect_data_error(file_of("{" + entry("w", "F32", "3", "[0,4]") + "}"), "shape is not an array");
  expect_data_error(file_of("{" + entry("w", "F32", "[-1]", "[0,4]") + "}"),
                    "a shape dimension is not a non-negative integer");
  expect_data_error(file_of("{" + entry("w", "F32", "[1.5]", "[0,4]") + "}"),
                    "a shape dimension is not a non-negative integer");
  expect_data_error(file_of("{" + entry("w", "F32", "[1]", "[0]") + "}"),
                    "data_offsets is not a [begin, end] pair");
  expect_data_error(file_of("{" + entry("w", "F32", "[1]", "[4,0]") + "}"),
                    "data_offsets end is before begin");
  expect_data_error(file_of("{\"__metadata__\":{\"k\":1}}"), "__metadata__ value of 'k'");
  expect_data_error(file_of("{\"__metadata__\":[]}"), "__metadata__ is not an object");
  expect_data_error(file_of("{" + entry("w", "F32", "[1]", "[0,4]") + "," +
                                entry("w", "F32", "[1]", "[4,8]") + "}",
                            std::string(8, '\0')),
                    "duplicate tensor name 'w'");
}

TEST(Safetensors, HugeShapes) {
  // 2^32 * 2^32 elements overflow 64 bits.
  expect_data_error(file_of("{" + entry("w", "F32", "[4294967296,4294967296]", "[0,4]") + "}"),
                    "tensor 'w': shape is too large");
  expect_data_error(file_of("{" + entry("w", "F32", "[18446744073709551615]", "[0,4]") + "}"),
                    "tensor 'w': shape is too large");
  // No overflow, but 4 TB cannot match 4 bytes of data.
  expect_data_error(file_of("{" + entry("w", "F32", "[1000000,1000000]", "[0,4]") + "}"),
                    "needs 4000000000000");
  std::string dims = "[";
  for (int i = 0; i < 65; ++i)
    dims += i ? ",1" : "1";
  expect_data_error(file_of("{" + entry("w", "F32", dims + "]", "[0,4]") + "}", "abcd"),
                    "65 dimensions");
}

TEST(Safetensors, OffsetsThatDoNotTileTheData) {
  const std::string data8(8, '\0');
  expect_data_error(file_of("{" + entry("w", "F32", "[2]", "[0,4]") + "}", data8),
                    "tensor 'w': data_offsets span 4 bytes but dtype F32 x shape [2] needs 8");
  expect_data_error(file_of("{" + entry("w", "F32", "[2]", "[8,16]") + "}", data8),
                    "tensor 'w': data_offsets [8, 16] run past the end of the data (8 bytes");
  expect_data_error(file_of("{" + entry("w", "F32", "[2]", "[0,8]") + "}", data8.substr(0, 5)),
                    "run past the end of the data");
  expect_data_error(file_of("{" + entry("a", "F32", "[2]", "[0,8]") + "," +
                                entry("b", "F32", "[2]", "[4,12]") + "}",
                            std::string(12, '\0')),
                    "data overlaps another tensor");
  expect_data_error(file_of("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                                entry("b", "F32", "[1]", "[8,12]") + "}",
                            std::string(12, '\0')),
                    "gap of 4 bytes in the data before tensor 'b'");
  expect_data_error(file_of("{" + entry("a", "F32", "[1]", "[4,8]") + "}", data8),
                    "gap of 4 bytes in the data before tensor 'a'");
  expect_data_error(file_of("{" + entry("a", "F32", "[1]", "[0,4]") + "}", data8),
                    "4 bytes after the last tensor are not described");
  expect_data_error(
      file_of("{" + entry("a", "F32", "[1]", "[18446744073709551612,18446744073709551616]") + "}",
              data8),
      "tensor 'a'");
}

// Deterministic mutations of a valid file: each parses or is a DataError, nothing else.
TEST(Safetensors, MutatedFilesNeverCrash) {
  const std::string valid = serialize_safetensors(
      {{"w", torch::randn({2, 3}).to(torch::kFloat16)}, {"n", torch::tensor(int64_t{5})}},
      {{"format", "pt"}});
  std::mt19937 rng(1);
  int errors = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      m[rng() % m.size()] = static_cast<char>(rng() % 256);
    try {
      parse(m);
    } catch (const DataError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);  // most mutations of the header are caught
}

TEST(Safetensors, FileErrorsNameTheFile) {
  test_util::TempDir dir;
  EXPECT_THROW(read_safetensors(dir.path() + "/missing.safetensors"), IoError);
  const std::string path = dir.write("bad.safetensors", file_of("{\"w\":5}"));
  try {
    read_safetensors(path);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  const std::string empty = dir.write("empty.safetensors", "");
  EXPECT_THROW(read_safetensors(empty), DataError);
}

TEST(Safetensors, WriterRejectsDuplicateNames) {
  EXPECT_THROW(serialize_safetensors({{"a", torch::ones({1})}, {"a", torch::ones({1})}}), Error);
  EXPECT_THROW(serialize_safetensors({{"__metadata__", torch::ones({1})}}), Error);
}

}  // namespace
}  // namespace chexscale::models
