// parse_enum: finds the value by its to_string name, and refuses any other text with a
// UsageError that names the field and lists every valid name in order.
#include "common/enum_parse.h"

#include <gtest/gtest.h>

#include "test_util/error_message.h"

namespace chexscale::test_enum {
namespace {

enum class Colour { kRed, kGreen, kBlue };

const char* to_string(Colour c) {
  switch (c) {
    case Colour::kRed:
      return "red";
    case Colour::kGreen:
      return "green";
    case Colour::kBlue:
      return "blue";
  }
  return "?";
}

TEST(EnumParse, EveryNameParsesToItsValue) {
  for (const Colour c : {Colour::kRed, Colour::kGreen, Colour::kBlue}) {
    EXPECT_EQ(parse_enum(to_string(c), "colour", {Colour::kRed, Colour::kGreen, Colour::kBlue}), c);
  }
}

TEST(EnumParse, AnOtherNameIsAUsageErrorListingTheChoices) {
  const auto refused = [](std::string_view text, std::initializer_list<Colour> values) {
    return test_util::message_of<UsageError>([&] { parse_enum(text, "colour", values); });
  };
  EXPECT_EQ(refused("Red", {Colour::kRed, Colour::kGreen, Colour::kBlue}),
            "colour 'Red': choose red, green or blue");
  EXPECT_EQ(refused("", {Colour::kRed, Colour::kGreen}), "colour '': choose red or green");
  EXPECT_EQ(refused("blue", {Colour::kRed}), "colour 'blue': choose red");
}

}  // namespace
}  // namespace chexscale::test_enum
