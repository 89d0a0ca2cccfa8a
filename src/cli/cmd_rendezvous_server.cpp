// `chexscale rendezvous-server`: the store an elastic job's launchers meet in
// (`chexscale launch --nnodes MIN:MAX --master-addr THIS_HOST --master-port PORT`), run on a host
// or pod of its own so that losing any worker node loses no rendezvous state.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "common/error.h"
#include "distributed/env.h"
#include "distributed/rendezvous_gate.h"
#include "launch/rendezvous_server.h"

namespace chexscale::cli {

void add_rendezvous_server_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "rendezvous-server",
      "Serve the rendezvous store of an elastic job (chexscale launch --nnodes MIN:MAX) until\n"
      "SIGTERM or SIGINT; run it on a host or pod outside the worker nodes.");
  struct Flags {
    int port = distributed::kDefaultMasterPort;
    std::string token_file;
    std::string job;
  };
  auto f = std::make_shared<Flags>();
  cmd->add_option("--port", f->port, "TCP port to serve on (every address)")->capture_default_str();
  cmd->add_option("--rdzv-token-file", f->token_file,
                  fmt::format("A file whose first line is the job token (else {}): only "
                              "launchers and workers holding it are admitted, the others are "
                              "refused and named in this server's log",
                              distributed::kEnvRdzvToken));
  cmd->add_option("--rdzv-id", f->job,
                  "With a token: admit only this job (--rdzv-id of its launchers); empty = any");
  registry.add(cmd, [f](const RunContext&) {
    if (f->port < 1 || f->port > 65535) {
      throw UsageError(fmt::format("`port` {} must be in [1, 65535]", f->port));
    }
    launch::ServerOptions options;
    options.port = f->port;
    options.token = launch::read_job_token(f->token_file);
    options.job = f->job;
    if (options.token.empty() && !options.job.empty()) {
      throw UsageError("`rdzv-id` admits one job only with a job token (--rdzv-token-file)");
    }
    launch::serve_rendezvous(options);
    return 0;
  });
}

}  // namespace chexscale::cli
