// The elastic job's shared key names (see elastic_keys.h).
#include "distributed/elastic_keys.h"

#include <fmt/format.h>

namespace chexscale::distributed {

std::string elastic_key(const std::string& job, const std::string& name) {
  return "chexscale/elastic/" + job + "/" + name;
}

std::string round_end_reason_key(const std::string& job, int round) {
  return elastic_key(job, fmt::format("r{}/end_reason", round));
}

std::string round_end_kind_key(const std::string& job, int round) {
  return elastic_key(job, fmt::format("r{}/end_kind", round));
}

std::string agent_key(const std::string& job, const std::string& agent, const std::string& name) {
  return elastic_key(job, "agent/" + agent + "/" + name);
}

}  // namespace chexscale::distributed
