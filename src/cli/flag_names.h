// Errors below the CLI name an option by its field ("bucket_mb 0 must be > 0"); the user typed a
// flag. The table from field names to flags lives here, the one place that knows both.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace chexscale::cli {

// `message` with its leading field name (followed by a space, ':' or nothing), and each field
// named between backticks ("use `amp` bf16"), replaced by its flag: "bucket_mb 0 must be > 0" ->
// "--bucket-mb 0 must be > 0". With `cmd`, the flag is the first of the table's flags for the
// field, then the field with dashes, that `cmd` has (the same field is --threads in one command
// and --loader-threads in another); without, the table's first. A field without a flag stays as it
// is (backticks dropped).
std::string with_flag_name(const std::string& message, const CLI::App* cmd = nullptr);

}  // namespace chexscale::cli
