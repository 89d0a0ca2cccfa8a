// Rendezvous: rank 0 serves a c10d TCPStore at MASTER_ADDR:MASTER_PORT, the others connect to it,
// retrying while the host does not resolve or refuses (hosts and pods start in any order); then
// every rank checks in and waits for the others, so a missing rank is named, not waited for
// forever. Where the launcher's agent already serves the store (torchrun), every rank is a client,
// and keys live under the attempt's prefix.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "common/error.h"
#include "distributed/env.h"

namespace chexscale::distributed {

// The wait for the other ranks was given up because `abandoned` said so (an --elastic in-place
// round that ended before its ranks met).
class RendezvousAbandoned : public DistError {
 public:
  using DistError::DistError;
};

// Joins the job described by `env` within `timeout`; returns the shared store (under
// env.store_prefix). Throws DistError naming the address, what was tried (resolution failures,
// refusals) and which ranks are missing. While it waits for the other ranks it asks `abandoned`
// (when given) every 20 ms, and throws RendezvousAbandoned once that returns true.
c10::intrusive_ptr<c10d::Store> rendezvous(const RendezvousEnv& env,
                                           std::chrono::milliseconds timeout,
                                           const std::function<bool()>& abandoned = {});

// "host:port" of the store, for messages.
std::string store_address(const RendezvousEnv& env);

// A TCP port that is free on this host right now (the kernel's pick for port 0), for single-node
// jobs; another process may take it before the store binds it, so callers bind it soon.
int pick_free_port();

}  // namespace chexscale::distributed
