// The field -> flag table of the options structs the CLI fills (see flag_names.h).
#include "cli/flag_names.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

namespace chexscale::cli {
namespace {

// Field names of the options structs below the CLI, and the flag that sets each.
constexpr std::pair<std::string_view, std::string_view> kFieldFlags[] = {
    // distributed::ReducerOptions, launch::LaunchOptions, launch::K8sRenderOptions
    {"compression", "--grad-compression"},
    {"worker_rdzv_timeout", "--rdzv-timeout"},
    {"namespace_name", "--namespace"},
    {"tolerations", "--toleration"},
    // measure::CommOptions, measure::ThroughputOptions
    {"iterations", "-n/--iters"},
    {"warmup", "-w/--warmup_iters"},
    {"threads", "--threads"},
    // data::LoaderOptions, PrepareOptions, SynthOptions; train::TrainerOptions and its parts
    // (fields whose flag is their name with dashes need no entry)
    {"threads", "--loader-threads"},
    {"image_size", "--size"},
    {"source", "--data"},
    {"data_dir", "--data"},
    {"out_dir", "--out"},
    {"prefetch_batches", "--prefetch"},
    {"records_per_shard", "--shard-records"},
    {"non_finite", "--on-nan"},
    {"base_lr", "--lr"},
    {"keep_last", "--keep-checkpoints"},
};

// Whether `cmd` has the option `flag` ("--bucket-mb", or a list of names as "-n/--iters").
bool has_flag(const CLI::App& cmd, std::string_view flag) {
  size_t at = 0;
  while (at <= flag.size()) {
    const size_t end = std::min(flag.find('/', at), flag.size());
    if (cmd.get_option_no_throw(std::string(flag.substr(at, end - at))) != nullptr) return true;
    at = end + 1;
  }
  return false;
}

// The flag that sets `field` (see with_flag_name), or "" for none.
std::string flag_of(const std::string& field, const CLI::App* cmd) {
  for (const auto& [name, flag] : kFieldFlags) {
    if (name == field && (cmd == nullptr || has_flag(*cmd, flag))) return std::string(flag);
  }
  if (cmd == nullptr) return "";
  std::string dashed = "--" + field;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return has_flag(*cmd, dashed) ? dashed : "";
}

}  // namespace

std::string with_flag_name(const std::string& message, const CLI::App* cmd) {
  std::string out;
  size_t at = 0;
  // The leading field.
  const auto is_word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  const auto field_end = static_cast<size_t>(
      std::find_if_not(message.begin(), message.end(), is_word) - message.begin());
  if (field_end > 0 &&
      (field_end == message.size() || message[field_end] == ' ' || message[field_end] == ':')) {
    const std::string flag = flag_of(message.substr(0, field_end), cmd);
    if (!flag.empty()) {
      out = flag;
      at = field_end;
    }
  }
  // Fields between backticks.
  for (size_t open = message.find('`', at); open != std::string::npos;
       open = message.find('`', at)) {
    const size_t close = message.find('`', open + 1);
    if (close == std::string::npos) break;
    const std::string field = message.substr(open + 1, close - open - 1);
    const std::string flag = flag_of(field, cmd);
    out += message.substr(at, open - at) + (flag.empty() ? field : flag);
    at = close + 1;
  }
  return out + message.substr(at);
}

}  // namespace chexscale::cli
