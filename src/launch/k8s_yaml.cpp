// JSON <-> YAML for manifests with yaml-cpp; see k8s_yaml.h.
#include "launch/k8s_yaml.h"

#include <yaml-cpp/yaml.h>

#include <regex>

#include "common/error.h"

namespace chexscale::launch {
namespace {

// YAML 1.2 core schema resolution of a plain (unquoted) scalar.
K8sObject resolve_plain(const std::string& s) {
  static const std::regex null_re("^(~|null|Null|NULL)?$");
  static const std::regex true_re("^(true|True|TRUE)$");
  static const std::regex false_re("^(false|False|FALSE)$");
  static const std::regex int_re("^[-+]?[0-9]+$");
  static const std::regex float_re(
      R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$)");
  if (std::regex_match(s, null_re)) return nullptr;
  if (std::regex_match(s, true_re)) return true;
  if (std::regex_match(s, false_re)) return false;
  if (std::regex_match(s, int_re)) {
    try {
      return std::stoll(s);
    } catch (const std::out_of_range&) {
      return s;
    }
  }
  if (std::regex_match(s, float_re)) return std::stod(s);
  return s;
}

void emit(YAML::Emitter& out, const K8sObject& v) {
  switch (v.type()) {
    case K8sObject::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key << key << YAML::Value;
        emit(out, value);
      }
      out << YAML::EndMap;
      return;
    case K8sObject::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const auto& item : v)
        emit(out, item);
      out << YAML::EndSeq;
      return;
    case K8sObject::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (s.find('\n') != std::string::npos) {
        out << YAML::Literal << s;
      } else if (!resolve_plain(s).is_string()) {
        out << YAML::DoubleQuoted << s;  // "1", "true", "" must stay strings
      } else {
        out << s;
      }
      return;
    }
    case K8sObject::value_t::boolean:
      out << v.get<bool>();
      return;
    case K8sObject::value_t::null:
      out << YAML::Null;
      return;
    default:
      out << v.dump();  // numbers: JSON's spelling is valid YAML
      return;
  }
}

K8sObject from_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      K8sObject obj = K8sObject::object();
      for (const auto& kv : node)
        obj[kv.first.as<std::string>()] = from_node(kv.second);
      return obj;
    }
    case YAML::NodeType::Sequence: {
      K8sObject arr = K8sObject::array();
      for (const auto& item : node)
        arr.push_back(from_node(item));
      return arr;
    }
    case YAML::NodeType::Scalar:
      // yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
      return node.Tag() == "?" ? resolve_plain(node.Scalar()) : K8sObject(node.Scalar());
    default:
      return nullptr;
  }
}

}  // namespace

std::string to_yaml(const K8sObject& object) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  emit(out, object);
  return std::string(out.c_str()) + "\n";
}

std::string to_yaml_stream(const std::vector<K8sObject>& objects) {
  std::string text;
  for (const auto& object : objects)
    text += "---\n" + to_yaml(object);
  return text;
}

std::vector<K8sObject> parse_yaml_stream(const std::string& text) {
  std::vector<K8sObject> docs;
  try {
    for (const auto& node : YAML::LoadAll(text)) {
      if (!node.IsNull()) docs.push_back(from_node(node));
    }
  } catch (const YAML::Exception& e) {
    throw DataError(std::string("not valid YAML: ") + e.what());
  }
  return docs;
}

}  // namespace chexscale::launch
