// Store helpers shared by the rendezvous, its gate, the elastic round and the watchdog (see
// store_io.h).
#include "distributed/store_io.h"

#include <thread>

namespace chexscale::distributed {

std::vector<uint8_t> store_bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

std::string store_string(const std::vector<uint8_t>& bytes) {
  return {bytes.begin(), bytes.end()};
}

bool wait_for_key(c10d::Store& store, const std::string& key,
                  std::chrono::steady_clock::time_point deadline,
                  const std::function<void()>& each_poll) {
  while (true) {
    if (each_poll) each_poll();
    if (store.check({key})) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kStorePoll);
  }
}

}  // namespace chexscale::distributed
