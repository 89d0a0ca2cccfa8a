// The elastic job's rendezvous server: a c10d TCPStore served by a process of its own (its own
// host or pod, outside the workers), so that the job's rendezvous state outlives any worker
// node. The launchers (elastic_rendezvous.h) and their workers are its clients; given a job
// token, its gate (distributed/rendezvous_gate.h) admits only clients that hold it.
#pragma once

#include <string>

namespace chexscale::launch {

struct ServerOptions {
  int port = 0;
  std::string token;  // "" = no gate
  std::string job;    // with a token: the only job admitted ("" = any)
};

// Serves the store on options.port (every address) until SIGTERM or SIGINT; prints one line
// when it listens. Returns the signal that ended it. Throws DistError when the port cannot be
// bound.
int serve_rendezvous(const ServerOptions& options);

// The job token: the first line of `file` when one is named (UsageError when it cannot be read
// or is empty), else CHEXSCALE_RDZV_TOKEN, else "".
std::string read_job_token(const std::string& file);

// A new job token: 32 bytes from /dev/urandom as 64 hex digits. Throws Error when it cannot be
// read.
std::string new_job_token();

}  // namespace chexscale::launch
