// Applies the env and YAML layers to CLI11 options; see config.h for the precedence contract.
#include "cli/config.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"

extern char** environ;  // NOLINT: POSIX process environment

namespace chexscale::cli {
namespace {

constexpr const char* kConfigOption = "config";

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

std::vector<CLI::Option*> settable_options(CLI::App& cmd) {
  std::vector<CLI::Option*> out;
  for (CLI::Option* opt : cmd.get_options()) {
    if (!long_name(*opt).empty()) out.push_back(opt);
  }
  return out;
}

bool has_option(const CLI::App& cmd, const std::string& key) {
  for (const CLI::Option* opt : cmd.get_options()) {
    if (long_name(*opt) == key) return true;
  }
  return false;
}

// Accepts "bucket_mb" as a spelling of "bucket-mb".
std::string normalise_key(std::string key) {
  for (char& c : key) {
    if (c == '_') c = '-';
  }
  return key;
}

bool any_command_has_option(const CLI::App& app, const std::string& key) {
  if (has_option(app, key)) return true;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (any_command_has_option(*sub, key)) return true;
  }
  return false;
}

CLI::App* find_subcommand(const CLI::App& app, const std::string& name) {
  for (CLI::App* sub :
       const_cast<CLI::App&>(app).get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> words;
  std::string w;
  while (in >> w)
    words.push_back(w);
  return words;
}

std::vector<std::string> node_values(const YAML::Node& node, const std::string& where) {
  if (node.IsScalar()) return {node.Scalar()};
  if (node.IsSequence()) {
    std::vector<std::string> values;
    for (const auto& item : node) {
      if (!item.IsScalar()) throw UsageError(where + ": list items must be plain values");
      values.push_back(item.Scalar());
    }
    return values;
  }
  if (node.IsNull()) return {};
  throw UsageError(where + ": expected a value or a list, found a mapping");
}

// Collects values for the command at `path` (from root) out of one YAML mapping.
class YamlCollector {
 public:
  YamlCollector(const CLI::App& root, std::vector<std::string> target_path, std::string file)
      : root_(root), target_(std::move(target_path)), file_(std::move(file)) {}

  std::map<std::string, YAML::Node> collect(const YAML::Node& doc) {
    if (!doc.IsMap()) throw UsageError("config file " + file_ + ": top level must be a mapping");
    // Top-level keys first, then sections on the target's path override them.
    walk_section(doc, root_, {}, /*top=*/true);
    return values_;
  }

 private:
  void walk_section(const YAML::Node& map, const CLI::App& app,
                    const std::vector<std::string>& path, bool top) {
    std::vector<std::pair<const YAML::Node, const CLI::App*>> subsections;
    std::vector<std::vector<std::string>> subpaths;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) {
        throw UsageError("config file " + file_ +
                         ": a key must be a plain name, not a list or a mapping");
      }
      const std::string raw = kv.first.as<std::string>();
      const std::string where = "config file " + file_ + ": key '" + join(path, raw) + "'";
      // A section: a (possibly multi-word) subcommand name whose value is a mapping.
      const CLI::App* section = &app;
      std::vector<std::string> section_path = path;
      for (const std::string& word : split_words(raw)) {
        section = section ? find_subcommand(*section, word) : nullptr;
        section_path.push_back(word);
      }
      if (section != nullptr && section != &app && kv.second.IsMap()) {
        subsections.emplace_back(kv.second, section);
        subpaths.push_back(section_path);
        continue;
      }
      const std::string key = normalise_key(raw);
      if (key == kConfigOption) throw UsageError(where + ": a config file cannot name another");
      const bool known = top ? any_command_has_option(root_, key) : has_option(app, key);
      if (!known) {
        throw UsageError(where + " is unknown" +
                         (top ? std::string(": no command has an option --") + key
                              : ": '" + app.get_name() + "' has no option --" + key));
      }
      if (on_target_path(path)) values_[key] = kv.second;
    }
    for (size_t i = 0; i < subsections.size(); ++i) {
      walk_section(subsections[i].first, *subsections[i].second, subpaths[i], false);
    }
  }

  bool on_target_path(const std::vector<std::string>& path) const {
    if (path.size() > target_.size()) return false;
    return std::equal(path.begin(), path.end(), target_.begin());
  }

  static std::string join(const std::vector<std::string>& path, const std::string& last) {
    std::string s;
    for (const auto& p : path)
      s += p + ".";
    return s + last;
  }

  const CLI::App& root_;
  std::vector<std::string> target_;
  std::string file_;
  std::map<std::string, YAML::Node> values_;
};

std::vector<std::string> path_of(const CLI::App& cmd) {
  std::vector<std::string> path;
  for (const CLI::App* a = &cmd; a != nullptr && a->get_parent() != nullptr; a = a->get_parent()) {
    path.insert(path.begin(), a->get_name());
  }
  return path;
}

void add_results(CLI::Option* opt, const std::vector<std::string>& values,
                 const std::string& where) {
  try {
    for (const auto& v : values)
      opt->add_result(v);
    opt->run_callback();
  } catch (const CLI::Error& e) {
    throw UsageError(where + ": " + e.what());
  }
}

// The values the config file `file` gives the options of `cmd` (and the commands above it).
std::map<std::string, YAML::Node> read_config_file(const std::string& file, const CLI::App& root,
                                                   const CLI::App& cmd) {
  std::ifstream in(file);
  if (!in) throw UsageError("cannot read config file " + file);
  if (std::filesystem::is_directory(file)) throw UsageError("config file " + file + " is a folder");
  YAML::Node doc;
  try {
    doc = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    throw UsageError("config file " + file + " is not valid YAML: " + e.what());
  }
  if (doc.IsNull()) return {};
  return YamlCollector(root, path_of(cmd), file).collect(doc);
}

}  // namespace

const char* to_string(ConfigSource source) {
  switch (source) {
    case ConfigSource::kFlag:
      return "flag";
    case ConfigSource::kEnv:
      return "env";
    case ConfigSource::kFile:
      return "file";
    case ConfigSource::kDefault:
      return "default";
  }
  return "?";
}

std::string env_name_for(const std::string& option_name) {
  std::string name = "CHEXSCALE_";
  for (char c : option_name) {
    name += (c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

std::string long_name(const CLI::Option& opt) {
  const auto& names = opt.get_lnames();
  if (names.empty() || names.front() == "help" || names.front() == "help-all") return "";
  return names.front();
}

std::string command_path(const CLI::App& cmd) {
  std::string s;
  for (const auto& p : path_of(cmd))
    s += (s.empty() ? "" : " ") + p;
  return s;
}

void ConfigLayers::add_config_option(CLI::App& cmd) {
  cmd.add_option("--config", "YAML file with option values (flag > env CHEXSCALE_<NAME> > file)")
      ->type_name("FILE");
}

void ConfigLayers::apply(CLI::App& root, CLI::App& cmd,
                         const std::map<std::string, std::string>* environ_in) {
  const auto env = environ_in ? *environ_in : process_environment();
  sources_.clear();

  // Which options the command line set.
  for (CLI::Option* opt : settable_options(cmd)) {
    if (opt->count() > 0) sources_[long_name(*opt)] = ConfigSource::kFlag;
  }

  // The config file: --config, else CHEXSCALE_CONFIG.
  config_file_.clear();
  if (CLI::Option* cfg = cmd.get_option_no_throw("--config"); cfg && cfg->count() > 0) {
    config_file_ = cfg->as<std::string>();
  } else if (auto it = env.find(env_name_for(kConfigOption)); it != env.end()) {
    config_file_ = it->second;
  }
  const std::map<std::string, YAML::Node> file_values =
      config_file_.empty() ? std::map<std::string, YAML::Node>{}
                           : read_config_file(config_file_, root, cmd);

  // The command's options and those of the commands above it (chexscale's --log-level).
  std::vector<CLI::Option*> options = settable_options(cmd);
  for (CLI::App* above = cmd.get_parent(); above != nullptr; above = above->get_parent()) {
    for (CLI::Option* opt : settable_options(*above)) {
      if (opt->count() > 0) sources_[long_name(*opt)] = ConfigSource::kFlag;
      options.push_back(opt);
    }
  }
  for (CLI::Option* opt : options) {
    const std::string name = long_name(*opt);
    if (name == kConfigOption || sources_.count(name)) continue;
    if (auto it = env.find(env_name_for(name)); it != env.end()) {
      add_results(opt, {it->second}, "env " + it->first);
      sources_[name] = ConfigSource::kEnv;
    } else if (auto fv = file_values.find(name); fv != file_values.end()) {
      const std::string where = "config file " + config_file_ + ": key '" + name + "'";
      const auto values = node_values(fv->second, where);
      if (values.empty()) {  // "key: ~" leaves the default in place
        sources_[name] = ConfigSource::kDefault;
        continue;
      }
      add_results(opt, values, where);
      sources_[name] = ConfigSource::kFile;
    } else {
      sources_[name] = ConfigSource::kDefault;
    }
  }
}

ConfigSource ConfigLayers::source(const std::string& option_name) const {
  auto it = sources_.find(option_name);
  return it == sources_.end() ? ConfigSource::kDefault : it->second;
}

std::string ConfigLayers::to_yaml(const CLI::App& cmd) const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const CLI::Option* opt : cmd.get_options()) {
    const std::string name = long_name(*opt);
    if (name.empty() || name == kConfigOption) continue;
    std::vector<std::string> values = opt->results();
    if (values.empty() && !opt->get_default_str().empty()) values = {opt->get_default_str()};
    if (values.empty() && opt->get_type_size() == 0) values = {"false"};  // an unset flag
    out << YAML::Key << name << YAML::Value;
    if (opt->get_expected_max() > 1 && values.size() != 1) {
      out << YAML::Flow << values;
    } else if (values.empty()) {
      out << YAML::Null;
    } else {
      out << values.front();
    }
    out << YAML::Comment(to_string(source(name)));
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace chexscale::cli
