// The list of chexscale's subcommands, one registration function per file (cmd_*.cpp).
#include "cli/command.h"

namespace chexscale::cli {

void add_version_command(CLI::App& app, CommandRegistry& registry);
void add_synth_command(CLI::App& app, CommandRegistry& registry);
void add_prepare_command(CLI::App& app, CommandRegistry& registry);
void add_report_command(CLI::App& app, CommandRegistry& registry);
void add_models_command(CLI::App& app, CommandRegistry& registry);
void add_export_weights_command(CLI::App& app, CommandRegistry& registry);
void add_k8s_command(CLI::App& app, CommandRegistry& registry);
void add_doctor_command(CLI::App& app, CommandRegistry& registry);

void add_env_command(CLI::App& app, CommandRegistry& registry);
void add_launch_command(CLI::App& app, CommandRegistry& registry);
void add_rendezvous_server_command(CLI::App& app, CommandRegistry& registry);
void add_train_command(CLI::App& app, CommandRegistry& registry);
void add_eval_command(CLI::App& app, CommandRegistry& registry);
void add_predict_command(CLI::App& app, CommandRegistry& registry);
void add_bench_command(CLI::App& app, CommandRegistry& registry);
void add_commbench_command(CLI::App& app, CommandRegistry& registry);
void add_simulate_command(CLI::App& app, CommandRegistry& registry);
void add_tune_command(CLI::App& app, CommandRegistry& registry);

void register_all_commands(CLI::App& app, CommandRegistry& registry) {
  add_version_command(app, registry);
  add_env_command(app, registry);
  add_launch_command(app, registry);
  add_rendezvous_server_command(app, registry);
  add_train_command(app, registry);
  add_eval_command(app, registry);
  add_predict_command(app, registry);
  add_synth_command(app, registry);
  add_prepare_command(app, registry);
  add_report_command(app, registry);
  add_models_command(app, registry);
  add_export_weights_command(app, registry);
  add_k8s_command(app, registry);
  add_doctor_command(app, registry);
  add_bench_command(app, registry);
  add_commbench_command(app, registry);
  add_simulate_command(app, registry);
  add_tune_command(app, registry);
}

}  // namespace chexscale::cli
