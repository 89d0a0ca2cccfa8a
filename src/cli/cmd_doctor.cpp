// `chexscale doctor`: preflight checks for a node or pod, one OK/WARN/FAIL line each; exits 1
// when any check failed.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "cli/flag_names.h"
#include "distributed/env.h"
#include "launch/doctor.h"

namespace chexscale::cli {

void add_doctor_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "doctor",
      "Preflight checks before a distributed job: rank variables, master address and store port,\n"
      "network interfaces (overlays, IPoIB, MTU) and the ones Gloo/NCCL would use, /dev/shm,\n"
      "GPUs, NCCL settings, LibTorch. Exit status 1 when a check fails.");
  auto options = std::make_shared<launch::DoctorOptions>();
  cmd->add_option("--master-addr", options->master_addr,
                  "Rendezvous host to check (default: MASTER_ADDR)");
  cmd->add_option("--master-port", options->master_port,
                  "Rendezvous port to check (default: MASTER_PORT)");
  registry.add(cmd, [options](const RunContext& ctx) {
    const auto checks = launch::run_doctor(*options, distributed::process_environment());
    for (const auto& c : checks) {
      fmt::print("{:<4} {:<9} {}\n", launch::to_string(c.status), c.topic,
                 with_flag_name(c.message, &ctx.cmd));
    }
    const bool failed = launch::any_failed(checks);
    fmt::print("doctor: {}\n", failed ? "FAIL (see the lines above)" : "no failures");
    return failed ? 1 : 0;
  });
}

}  // namespace chexscale::cli
