// JSON values <-> YAML documents, for manifests: a multi-document YAML stream for kubectl, and
// the reverse (YAML 1.2 core schema: plain scalars become null/bool/int/float, quoted ones strings)
// so rendered YAML can be checked against JSON schemas.
#pragma once

#include <string>
#include <vector>

#include "launch/k8s_options.h"

namespace chexscale::launch {

// One YAML document (no "---"), block style; strings that would read back as another type are
// quoted, multi-line strings are literal blocks.
std::string to_yaml(const K8sObject& object);

// Documents joined by "---" lines, ready for `kubectl apply -f`.
std::string to_yaml_stream(const std::vector<K8sObject>& objects);

// Parses every document of a YAML stream; throws DataError on malformed YAML.
std::vector<K8sObject> parse_yaml_stream(const std::string& text);

}  // namespace chexscale::launch
