// The rendezvous server's gate: a server given a job token (and, if it names one, a job) admits
// only the launchers and workers that prove they hold the token, and refuses the others with a
// clear error, naming them in its log; a job's processes never see a refused one. The proof is a
// challenge and answer (SHA-256 of a fresh random challenge, the job id and the token), so the
// token never crosses the network. Keys under "chexscale/gate/": "required" (the server has a
// token), "hellos" (a counter), and per hello n: "hello/<n>" ("<job> <who>"), "challenge/<n>",
// "answer/<n>", "verdict/<n>" ("ok" or "refused: <why>").
// The store itself, like torch's TCPStore, authenticates no one: the gate keeps out other jobs
// and stray processes, not an attacker who can reach the port.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

namespace chexscale::distributed {

// The variable that holds a job token (launch and rendezvous-server also read --rdzv-token-file).
inline constexpr const char* kEnvRdzvToken = "CHEXSCALE_RDZV_TOKEN";

// The answer to `challenge` for `job` and `token`.
std::string gate_answer(const std::string& challenge, const std::string& job,
                        const std::string& token);

// A client's passage (`who`: "node n1", "rank 3"): returns once admitted, or at once when the
// server keeps no gate and `token` is empty. Throws UsageError when the server refuses (its
// reason), when this process has a token and the server none, and DistError when the server does
// not answer within `timeout`.
void pass_gate(c10d::Store& store, const std::string& job, const std::string& who,
               const std::string& token, std::chrono::milliseconds timeout);

// The server's side, on a client of its own store: answers every hello on a thread of its own.
class RendezvousGate {
 public:
  // `job`: the only job admitted ("": any).
  RendezvousGate(c10::intrusive_ptr<c10d::Store> store, std::string token, std::string job);
  ~RendezvousGate();
  RendezvousGate(const RendezvousGate&) = delete;
  RendezvousGate& operator=(const RendezvousGate&) = delete;
  int refused() const { return refused_.load(); }

 private:
  struct Pending {
    std::string job, who, challenge;
    std::chrono::steady_clock::time_point deadline;
  };
  void loop();
  void answer(int64_t n, const Pending& p, const std::string& answer);

  c10::intrusive_ptr<c10d::Store> store_;
  const std::string token_;
  const std::string job_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> refused_{0};
  std::map<int64_t, Pending> pending_;
  std::thread thread_;
};

}  // namespace chexscale::distributed
