// Small helpers shared by everything that talks to a c10d store by key: strings to and from the
// store's byte values, and a polling wait for a key.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace chexscale::distributed {

// A string as a store value, and back.
std::vector<uint8_t> store_bytes(const std::string& s);
std::string store_string(const std::vector<uint8_t>& bytes);

// How often wait_for_key looks at the store.
inline constexpr std::chrono::milliseconds kStorePoll{20};

// Waits until `key` is in `store`, looking every kStorePoll; false at `deadline`. Before each
// look it calls `each_poll` when given, which may throw to end the wait (a round that was
// abandoned, for example). Unlike Store::wait, the wait never blocks the client's socket, so
// other threads' requests on the same client go on.
bool wait_for_key(c10d::Store& store, const std::string& key,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<void()>& each_poll = {});

}  // namespace chexscale::distributed
