// Checked reads of JSON result files: each failure is a DataError naming the file and the field
// (missing, null, wrong type, wrong schema), so a bad bench.json or sweep.json says what to fix.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>

#include "common/error.h"

namespace chexscale::report {

// j[name]; DataError when it is missing or null.
inline const nlohmann::json& field(const nlohmann::json& j, const char* name,
                                   const std::string& file) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) {
    throw DataError(fmt::format("{}: missing field '{}'", file, name));
  }
  return *it;
}

// j[name] as T; DataError when it is missing, null or not a T.
template <typename T>
T get_field(const nlohmann::json& j, const char* name, const std::string& file) {
  const nlohmann::json& v = field(j, name, file);
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw DataError(fmt::format("{}: field '{}' has the wrong type ({})", file, name, v.dump()));
  }
}

// j[name] as T, or `fallback` when it is missing or null; DataError when it is not a T.
template <typename T>
T get_optional(const nlohmann::json& j, const char* name, const std::string& file, T fallback) {
  if (!j.contains(name) || j.at(name).is_null()) return fallback;
  return get_field<T>(j, name, file);
}

// A "schema" field, when there is one, must start with `prefix` (e.g. "chexscale.bench/").
inline void check_schema(const nlohmann::json& j, const char* prefix, const std::string& file) {
  if (!j.contains("schema")) return;
  const auto schema = get_field<std::string>(j, "schema", file);
  if (schema.rfind(prefix, 0) != 0) {
    throw DataError(fmt::format("{}: schema '{}' is not {}1", file, schema, prefix));
  }
}

}  // namespace chexscale::report
