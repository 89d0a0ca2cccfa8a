// Rendezvous that nobody answers: the error names the address, what was tried and the missing
// ranks.
#include <gtest/gtest.h>

#include "common/error.h"
#include "distributed/rendezvous.h"

namespace chexscale {
namespace {

distributed::RendezvousEnv two_rank_env(int rank, const std::string& host, int port) {
  distributed::RendezvousEnv env;
  env.rank = {rank, "test"};
  env.world_size = {2, "test"};
  env.local_rank = {0, "test"};
  env.local_world_size = {1, "test"};
  env.master_addr = {host, "test"};
  env.master_port = {port, "test"};
  return env;
}

std::string rendezvous_error(const distributed::RendezvousEnv& env) {
  try {
    distributed::rendezvous(env, std::chrono::milliseconds(1500));
  } catch (const DistError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Rendezvous, RefusedConnectionTimesOutNamingAddressAndWhatWasTried) {
  const int port = distributed::pick_free_port();  // nobody listens there
  const std::string message = rendezvous_error(two_rank_env(1, "127.0.0.1", port));
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
}

TEST(Rendezvous, UnresolvableHostTimesOutSayingItDidNotResolve) {
  const std::string message = rendezvous_error(two_rank_env(1, "no-such-host.invalid", 29999));
  EXPECT_NE(message.find("'no-such-host.invalid' did not resolve"), std::string::npos) << message;
}

TEST(Rendezvous, ServerAloneNamesTheMissingRanks) {
  const std::string message =
      rendezvous_error(two_rank_env(0, "127.0.0.1", distributed::pick_free_port()));
  EXPECT_NE(message.find("1 of 2 ranks joined; missing ranks: 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace chexscale
