// `chexscale rendezvous-server`: the store an elastic job's launchers meet in
// (`chexscale launch --nnodes MIN:MAX --master-addr THIS_HOST --master-port PORT`), run on a host
// or pod of its own so that losing any worker node loses no rendezvous state.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "common/error.h"
#include "distributed/env.h"
#include "launch/rendezvous_server.h"

namespace chexscale::cli {

void add_rendezvous_server_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "rendezvous-server",
      "Serve the rendezvous store of an elastic job (chexscale launch --nnodes MIN:MAX) until\n"
      "SIGTERM or SIGINT; run it on a host or pod outside the worker nodes.");
  auto port = std::make_shared<int>(distributed::kDefaultMasterPort);
  cmd->add_option("--port", *port, "TCP port to serve on (every address)")->capture_default_str();
  registry.add(cmd, [port](const RunContext&) {
    if (*port < 1 || *port > 65535) {
      throw UsageError(fmt::format("`port` {} must be in [1, 65535]", *port));
    }
    launch::serve_rendezvous(*port);
    return 0;
  });
}

}  // namespace chexscale::cli
