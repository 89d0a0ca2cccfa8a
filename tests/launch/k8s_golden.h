// Reading rendered manifests back as kubectl would (yaml-cpp), for the golden checks of
// test_k8s_render.cpp and test_k8s_elastic.cpp: their job, the objects by kind, string lists, the
// kubelet's $(NAME) expansion in args, and a Job's podFailurePolicy applied as the Job controller
// applies it.
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <string>
#include <vector>

#include "launch/k8s_render.h"
#include "launch/k8s_yaml.h"

namespace chexscale::launch {

// The job the golden checks render: 3 pods of 2 workers, job cxr in namespace ml, port 29511.
inline K8sRenderOptions base_options() {
  K8sRenderOptions o;
  o.job_name = "cxr";
  o.namespace_name = "ml";
  o.image = "registry.example/chexscale:0.1.0";
  o.nnodes = 3;
  o.nproc_per_node = 2;
  o.master_port = 29511;
  o.command = {"bench", "--arch", "densenet121"};
  return o;
}

// Renders and parses the YAML stream back with yaml-cpp (what kubectl would read).
inline std::vector<YAML::Node> render_yaml(const K8sRenderOptions& o) {
  return YAML::LoadAll(to_yaml_stream(render_manifests(o)));
}

inline YAML::Node find_kind(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const auto& d : docs) {
    if (d["kind"].as<std::string>() == kind) return d;
  }
  ADD_FAILURE() << "no " << kind << " rendered";
  return YAML::Node();
}

inline std::vector<std::string> strings(const YAML::Node& seq) {
  std::vector<std::string> out;
  for (const auto& s : seq)
    out.push_back(s.as<std::string>());
  return out;
}

// What the kubelet does to args: $(NAME) becomes the value of env NAME.
inline std::vector<std::string> expand(std::vector<std::string> args,
                                       const std::map<std::string, std::string>& env) {
  for (auto& a : args) {
    for (const auto& [name, value] : env) {
      const std::string ref = "$(" + name + ")";
      for (size_t p = a.find(ref); p != std::string::npos; p = a.find(ref))
        a.replace(p, ref.size(), value);
    }
  }
  return args;
}

// A pod's end as the Job controller sees it: its container's exit code, and whether the pod
// carries the condition DisruptionTarget (evicted, preempted, drained).
struct PodEnd {
  int exit_code;
  bool disrupted;
};

// The action of a Job's podFailurePolicy for a failed pod, as the Job controller picks it: the
// first rule that matches ("Count" when none does); exit code 0 matches no onExitCodes rule.
inline std::string failure_action(const YAML::Node& policy, const std::string& container,
                                  PodEnd end) {
  for (const auto& rule : policy["rules"]) {
    bool match = false;
    if (rule["onPodConditions"]) {
      for (const auto& c : rule["onPodConditions"]) {
        match = match || (end.disrupted && c["type"].as<std::string>() == "DisruptionTarget" &&
                          c["status"].as<std::string>() == "True");
      }
    } else if (end.exit_code != 0) {
      const auto codes = rule["onExitCodes"];
      EXPECT_EQ(codes["containerName"].as<std::string>(), container);
      bool listed = false;
      for (const auto& v : codes["values"])
        listed = listed || v.as<int>() == end.exit_code;
      match = (codes["operator"].as<std::string>() == "In") == listed;
    }
    if (match) return rule["action"].as<std::string>();
  }
  return "Count";
}

}  // namespace chexscale::launch
