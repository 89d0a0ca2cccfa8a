// Layered configuration shared by every subcommand: flag > env CHEXSCALE_<NAME> > YAML file >
// default.
//
// Options are declared once, as CLI11 options bound to typed variables. After argv is parsed,
// ConfigLayers fills every option the command line left unset from the environment, then from the
// YAML file given by --config (or CHEXSCALE_CONFIG). A YAML file may hold top-level keys (applied
// to every command that has that option) and sections named after commands ("train:",
// "k8s render:" or nested "k8s: {render: ...}"), so one file can describe a whole experiment.
// Keys that no command knows are errors that name the key.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <string>
#include <vector>

namespace chexscale::cli {

// Where a resolved option value came from.
enum class ConfigSource { kFlag, kEnv, kFile, kDefault };

const char* to_string(ConfigSource source);

// Env var name for a long option name: "bucket-mb" -> "CHEXSCALE_BUCKET_MB".
std::string env_name_for(const std::string& option_name);

class ConfigLayers {
 public:
  // Adds --config FILE to a command (and all of its subcommands are expected to call it too).
  static void add_config_option(CLI::App& cmd);

  // Applies env and YAML layers to `cmd`, the selected (leaf) subcommand of `root`.
  // `environ` is injectable for tests; nullptr means the process environment.
  void apply(CLI::App& root, CLI::App& cmd,
             const std::map<std::string, std::string>* environ = nullptr);

  // Source of an option's value after apply() ("flag", "env", "file", "default").
  ConfigSource source(const std::string& option_name) const;

  // The resolved configuration as YAML, with each value's source as a comment.
  std::string to_yaml(const CLI::App& cmd) const;

  const std::string& config_file() const { return config_file_; }

 private:
  std::map<std::string, ConfigSource> sources_;
  std::string config_file_;
};

// The command path of a subcommand, e.g. "k8s render".
std::string command_path(const CLI::App& cmd);

// The long name of an option without dashes ("bucket-mb"), or "" for positionals/help.
std::string long_name(const CLI::Option& opt);

}  // namespace chexscale::cli
