// The store helpers against a real c10d TCPStore: values round-trip as bytes, and wait_for_key
// returns when another client sets the key, gives up at its deadline, and ends at once when its
// callback throws.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "distributed/store_io.h"

namespace chexscale::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

c10::intrusive_ptr<c10d::TCPStore> store_at(int port, bool server) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = server;
  options.waitWorkers = false;
  return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

TEST(StoreIo, AStringRoundTripsThroughTheStoreBytesAndAll) {
  const auto server = store_at(0, true);
  const std::string value("a\0b\xff", 4);
  server->set("k", store_bytes(value));
  EXPECT_EQ(store_string(store_at(server->getPort(), false)->get("k")), value);
  EXPECT_EQ(store_bytes("").size(), 0u);
}

TEST(StoreIo, WaitForKeyReturnsOnceAnotherClientSetsIt) {
  const auto server = store_at(0, true);
  const auto other = store_at(server->getPort(), false);
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    other->set("ready", store_bytes("1"));
  });
  const auto start = Clock::now();
  const bool found = wait_for_key(*server, "ready", start + std::chrono::seconds(30));
  setter.join();
  EXPECT_TRUE(found);
  EXPECT_GE(Clock::now() - start, milliseconds(150));
}

TEST(StoreIo, WaitForKeyIsFalseAtItsDeadline) {
  const auto server = store_at(0, true);
  const auto start = Clock::now();
  EXPECT_FALSE(wait_for_key(*server, "never", start + milliseconds(300)));
  EXPECT_GE(Clock::now() - start, milliseconds(300));
}

TEST(StoreIo, WaitForKeyEndsWhenItsCallbackThrows) {
  const auto server = store_at(0, true);
  int polls = 0;
  const auto give_up_at_the_third = [&] {
    if (++polls == 3) throw std::runtime_error("given up");
  };
  EXPECT_THROW(
      wait_for_key(*server, "never", Clock::now() + std::chrono::seconds(30), give_up_at_the_third),
      std::runtime_error);
  EXPECT_EQ(polls, 3);
}

}  // namespace
}  // namespace chexscale::distributed
