// Runs a rendered pod template the way the kubelet would, on this machine: the container's
// command and args with $(VAR) expanded from its env, env values and downward-API fields
// (annotations, labels, the pod's name) resolved, each volume a host directory (ConfigMap and
// Secret data written into it; a PersistentVolumeClaim one directory shared by every pod that
// mounts it), and the pod's DNS names answered by a private /etc/hosts.
//
// Two liberties, both explained here: (1) there is no container filesystem, so paths under a
// volume's mountPath in env values and args are rewritten to that volume's host directory;
// (2) names such as <job>-0.<job> resolve through a hosts file bind-mounted over /etc/hosts in a
// private mount namespace (`unshare --mount`, root only), mapping them to 127.0.0.1, so the
// launcher and the workers resolve exactly the names the manifests contain.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "launch/k8s_render.h"
#include "launch/k8s_yaml.h"
#include "test_util/process.h"
#include "test_util/read_file.h"

namespace chexscale::test_util {

using launch::K8sObject;

struct SimulatedPod {
  std::string name;                                // pod name, also its HOSTNAME
  K8sObject template_;                             // PodTemplateSpec from the manifest
  std::map<std::string, std::string> annotations;  // set by the controller (completion index)
  std::map<std::string, std::string> labels;       // set by the controller (replica index)
  std::vector<std::pair<std::string, std::string>> injected_env;  // set by an operator, first
};

inline std::string expand_refs(std::string s, const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 2, "$(") == 0) {
      const size_t close = s.find(')', i);
      const std::string name = close == std::string::npos ? "" : s.substr(i + 2, close - i - 2);
      if (auto it = env.find(name); it != env.end()) {
        out += it->second;
        i = close;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// Every object of the YAML files `k8s render --out DIR` wrote.
inline std::vector<K8sObject> read_manifests(const std::string& dir) {
  std::vector<K8sObject> objects;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    for (auto& o : launch::parse_yaml_stream(file_contents(entry.path())))
      objects.push_back(o);
  }
  return objects;
}

// The first object of `kind` (and `name`, when given).
inline const K8sObject& find_kind(const std::vector<K8sObject>& objects, const std::string& kind,
                                  const std::string& name = "") {
  for (const auto& o : objects) {
    if (o.at("kind") == kind && (name.empty() || o.at("metadata").at("name") == name)) return o;
  }
  throw std::runtime_error("no " + kind + " " + name + " rendered");
}

class KubeletSim {
 public:
  KubeletSim(std::string root, std::string chexscale_bin, std::vector<K8sObject> objects,
             std::vector<std::string> dns_names)
      : root_(std::move(root)),
        bin_(std::move(chexscale_bin)),
        objects_(std::move(objects)),
        hosts_file_(root_ + "/hosts") {
    std::ofstream hosts(hosts_file_);
    hosts << "127.0.0.1 localhost\n";
    for (const auto& name : dns_names)
      hosts << "127.0.0.1 " << name << "\n";
  }

  // The process the container runtime would start for `pod`.
  ProcessSpec prepare(const SimulatedPod& pod) {
    const K8sObject& spec = pod.template_.at("spec");
    const K8sObject& c = spec.at("containers").at(0);
    const std::string pod_dir = root_ + "/" + pod.name;
    std::map<std::string, std::string> mounts;  // mountPath -> host dir
    for (const auto& m : c.at("volumeMounts")) {
      const std::string host = volume_dir(spec, pod_dir, m.at("name"));
      std::filesystem::create_directories(host);
      mounts[m.at("mountPath")] = host;
      materialize(spec, m.at("name"), host);
    }
    const auto rewrite = [&](std::string s) {
      for (const auto& [path, host] : mounts) {
        if (s == path || s.rfind(path + "/", 0) == 0) return host + s.substr(path.size());
      }
      return s;
    };
    std::map<std::string, std::string> env;
    std::vector<std::string> env_list = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                         "HOSTNAME=" + pod.name};
    const auto set = [&](const std::string& name, const std::string& value) {
      env[name] = value;
      env_list.push_back(name + "=" + value);
    };
    for (const auto& [name, value] : pod.injected_env)
      set(name, value);
    for (const auto& e : c.value("env", K8sObject::array())) {
      const std::string name = e.at("name");
      if (e.contains("value")) {
        set(name, rewrite(expand_refs(e.at("value"), env)));
      } else {
        set(name, field_ref(pod, e.at("valueFrom").at("fieldRef").at("fieldPath")));
      }
    }
    // The image's ENTRYPOINT is `chexscale` on PATH; here it is the binary under test.
    std::vector<std::string> argv = {
        "/usr/bin/unshare", "--mount", "--",
        "/bin/sh",          "-c",      "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
        hosts_file_};
    argv.push_back(c.at("command").at(0) == "chexscale" ? bin_
                                                        : c.at("command").at(0).get<std::string>());
    for (const auto& a : c.at("args"))
      argv.push_back(rewrite(expand_refs(a, env)));
    return {argv, env_list, pod_dir + "/log.txt"};
  }

 private:
  std::string field_ref(const SimulatedPod& pod, const std::string& path) const {
    const std::string prefix = "metadata.annotations['";
    if (path.rfind(prefix, 0) == 0) {
      return pod.annotations.at(path.substr(prefix.size(), path.size() - prefix.size() - 2));
    }
    const std::string labels = "metadata.labels['";
    if (path.rfind(labels, 0) == 0) {
      return pod.labels.at(path.substr(labels.size(), path.size() - labels.size() - 2));
    }
    if (path == "metadata.name") return pod.name;
    throw std::runtime_error("fieldRef not simulated: " + path);
  }

  // A claim's directory is the same for every pod (root/pvc/<claim>); other volumes are the
  // pod's own.
  std::string volume_dir(const K8sObject& spec, const std::string& pod_dir,
                         const std::string& volume) const {
    for (const auto& v : spec.at("volumes")) {
      if (v.at("name") == volume && v.contains("persistentVolumeClaim")) {
        return root_ + "/pvc/" + v.at("persistentVolumeClaim").at("claimName").get<std::string>();
      }
    }
    return pod_dir + "/volumes/" + volume;
  }

  // ConfigMap volumes get their data as files, Secret volumes their stringData (each item's key
  // at its path); other volumes start empty.
  void materialize(const K8sObject& spec, const std::string& volume,
                   const std::string& host) const {
    for (const auto& v : spec.at("volumes")) {
      if (v.at("name") != volume) continue;
      if (v.contains("configMap")) {
        for (const auto& [file, text] :
             object("ConfigMap", v.at("configMap").at("name")).at("data").items())
          std::ofstream(host + "/" + file) << text.get<std::string>();
      }
      if (v.contains("secret")) {
        const K8sObject& data = object("Secret", v.at("secret").at("secretName")).at("stringData");
        for (const auto& item : v.at("secret").at("items")) {
          std::ofstream(host + "/" + item.at("path").get<std::string>())
              << data.at(item.at("key").get<std::string>()).get<std::string>();
        }
      }
    }
  }

  const K8sObject& object(const std::string& kind, const std::string& name) const {
    for (const auto& o : objects_) {
      if (o.at("kind") == kind && o.at("metadata").at("name") == name) return o;
    }
    throw std::runtime_error("no " + kind + " " + name + " among the objects");
  }

  std::string root_;
  std::string bin_;
  std::vector<K8sObject> objects_;
  std::string hosts_file_;
};

}  // namespace chexscale::test_util
