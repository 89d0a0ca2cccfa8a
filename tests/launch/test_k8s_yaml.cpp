// The YAML writer and reader of manifests: strings that look like numbers, booleans, null or YAML
// syntax stay strings through a round trip, and a malformed stream is a DataError.
#include <gtest/gtest.h>

#include "common/error.h"
#include "launch/k8s_yaml.h"

namespace chexscale::launch {
namespace {

TEST(K8sYaml, StringsThatLookLikeOtherTypesStayStrings) {
  K8sObject o = {{"one", "1"},
                 {"yes", "true"},
                 {"empty", ""},
                 {"null", "~"},
                 {"num", 1},
                 {"flag", false},
                 {"float", 0.5},
                 {"multi", "a: 1\nb: [2]\n"},
                 {"ref", "$(X)"},
                 {"dashes", "--"},
                 {"list", K8sObject::array()},
                 {"map", K8sObject::object()}};
  const auto back = parse_yaml_stream(to_yaml_stream({o, o}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], o);
  EXPECT_EQ(back[1], o);
  EXPECT_THROW(parse_yaml_stream("a: [1, 2\n"), DataError);
}

}  // namespace
}  // namespace chexscale::launch
