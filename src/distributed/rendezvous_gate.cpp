// The rendezvous gate's client and server sides (see rendezvous_gate.h).
#include "distributed/rendezvous_gate.h"

#include <fmt/format.h>

#include <random>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "common/sha256.h"
#include "distributed/store_io.h"

namespace chexscale::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kRequired = "chexscale/gate/required";
constexpr const char* kHellos = "chexscale/gate/hellos";
// How long the server waits for a client's answer (it looks for new hellos every kStorePoll).
constexpr milliseconds kAnswerTimeout{10000};

std::string key(const char* name, int64_t n) {
  return fmt::format("chexscale/gate/{}/{}", name, n);
}

std::string random_challenge() {
  std::random_device device;
  std::string out;
  for (int i = 0; i < 4; ++i)
    out += fmt::format("{:08x}", device());
  return out;
}

}  // namespace

std::string gate_answer(const std::string& challenge, const std::string& job,
                        const std::string& token) {
  return sha256_hex(challenge + ":" + job + ":" + token);
}

void pass_gate(c10d::Store& store, const std::string& job, const std::string& who,
               const std::string& token, milliseconds timeout) {
  if (!store.check({kRequired})) {
    if (token.empty()) return;
    throw UsageError(fmt::format(
        "{} has a job token ({} or --rdzv-token-file) but the rendezvous server keeps no gate: "
        "start `chexscale rendezvous-server` with the same token, or give none",
        who, kEnvRdzvToken));
  }
  const auto deadline = Clock::now() + timeout;
  const int64_t n = store.add(kHellos, 1);
  store.set(key("hello", n), store_bytes(job + " " + who));
  if (!wait_for_key(store, key("challenge", n), deadline)) {
    throw DistError(fmt::format("the rendezvous server's gate did not answer {} within {:g} s", who,
                                static_cast<double>(timeout.count()) / 1000.0));
  }
  const std::string challenge = store_string(store.get(key("challenge", n)));
  store.set(key("answer", n), store_bytes(gate_answer(challenge, job, token)));
  if (!wait_for_key(store, key("verdict", n), deadline)) {
    throw DistError(fmt::format("the rendezvous server's gate gave {} no verdict within {:g} s",
                                who, static_cast<double>(timeout.count()) / 1000.0));
  }
  const std::string verdict = store_string(store.get(key("verdict", n)));
  if (verdict != "ok") {
    throw UsageError(fmt::format("the rendezvous server refused {} of job '{}': {}", who, job,
                                 verdict.substr(verdict.find(' ') + 1)));
  }
}

RendezvousGate::RendezvousGate(c10::intrusive_ptr<c10d::Store> store, std::string token,
                               std::string job)
    : store_(std::move(store)), token_(std::move(token)), job_(std::move(job)) {
  store_->set(kRequired, store_bytes(job_.empty() ? "*" : job_));
  thread_ = std::thread([this] { loop(); });
}

RendezvousGate::~RendezvousGate() {
  stopping_ = true;
  thread_.join();
}

void RendezvousGate::loop() {
  int64_t seen = 0;
  while (!stopping_) {
    try {
      const int64_t hellos = store_->add(kHellos, 0);
      for (; seen < hellos && store_->check({key("hello", seen + 1)}); ++seen) {
        const std::string hello = store_string(store_->get(key("hello", seen + 1)));
        const size_t space = hello.find(' ');
        Pending p{hello.substr(0, space),
                  space == std::string::npos ? "?" : hello.substr(space + 1), random_challenge(),
                  Clock::now() + kAnswerTimeout};
        store_->set(key("challenge", seen + 1), store_bytes(p.challenge));
        pending_[seen + 1] = p;
      }
      for (auto it = pending_.begin(); it != pending_.end();) {
        const int64_t n = it->first;
        if (store_->check({key("answer", n)})) {
          answer(n, it->second, store_string(store_->get(key("answer", n))));
        } else if (Clock::now() >= it->second.deadline) {
          answer(n, it->second, "");
        } else {
          ++it;
          continue;
        }
        it = pending_.erase(it);
      }
    } catch (const std::exception& e) {
      log::warn("chexscale rendezvous-server: gate: {}", e.what());
    }
    std::this_thread::sleep_for(kStorePoll);
  }
}

void RendezvousGate::answer(int64_t n, const Pending& p, const std::string& answer) {
  std::string why;
  if (!job_.empty() && p.job != job_) {
    why = fmt::format("this server serves job '{}' only", job_);
  } else if (answer.empty()) {
    why = "no answer to the gate's challenge";
  } else if (answer != gate_answer(p.challenge, p.job, token_)) {
    why = "wrong job token";
  }
  if (why.empty()) {
    store_->set(key("verdict", n), store_bytes("ok"));
    log::info("chexscale rendezvous-server: admitted {} of job '{}'", p.who, p.job);
    return;
  }
  ++refused_;
  store_->set(key("verdict", n), store_bytes("refused: " + why));
  log::warn("chexscale rendezvous-server: refused {} of job '{}': {}", p.who, p.job, why);
}

}  // namespace chexscale::distributed
