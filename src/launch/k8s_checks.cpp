// K8sRenderOptions::validate(): the checks that every option can make a valid manifest, each
// refusal a UsageError naming the field (the CLI turns it into the flag).
#include <fmt/format.h>

#include <regex>

#include "common/error.h"
#include "launch/k8s_options.h"
#include "launch/k8s_pod.h"
#include "train/stop_contract.h"

namespace chexscale::launch {
namespace {

using train::kMaxStopGrace;  // --stop-grace's bound

// Pod host names are "<job>-<index>" and objects "<job>-config": leave room under 63 characters.
constexpr size_t kMaxJobNameLength = 50;

void check_matches(const std::string& value, const std::regex& pattern, const std::string& field,
                   const std::string& expected) {
  if (!std::regex_match(value, pattern)) {
    throw UsageError(field + " '" + value + "': expected " + expected);
  }
}

void check_quantity(const std::string& value, const std::string& field) {
  static const std::regex quantity(R"(^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$)");
  check_matches(value, quantity, field, "a Kubernetes quantity such as 500m, 4, 8Gi");
}

void check_mount_path(const std::string& path, const std::string& field) {
  if (path.size() < 2 || path.front() != '/') {
    throw UsageError(field + " '" + path + "': expected an absolute path other than /");
  }
}

// An image reference pinned to a version tag or digest (not untagged, not :latest).
void check_image(const std::string& image) {
  if (image.empty()) throw UsageError("image: required");
  const auto slash = image.rfind('/');
  const auto colon = image.rfind(':');  // a tag's colon comes after the last '/'
  const bool pinned = image.find('@') != std::string::npos ||
                      (colon != std::string::npos && (slash == std::string::npos || colon > slash));
  if (!pinned || (image.size() > 7 && image.substr(image.size() - 7) == ":latest")) {
    throw UsageError("image '" + image +
                     "': pin a version tag or digest (an untagged or :latest image can differ "
                     "between nodes)");
  }
}

// The options' counts, port, uid and grace period within their ranges.
void check_counts(const K8sRenderOptions& o) {
  if (o.nnodes < 1) throw UsageError(fmt::format("nnodes {} must be at least 1", o.nnodes));
  if (o.nproc_per_node < 1) {
    throw UsageError(fmt::format("nproc_per_node {} must be at least 1", o.nproc_per_node));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    throw UsageError(fmt::format("master_port {} must be in [1, 65535]", o.master_port));
  }
  if (o.max_restarts < 0) {
    throw UsageError(fmt::format("max_restarts {} must be at least 0", o.max_restarts));
  }
  if (o.run_as_user < 1) {
    throw UsageError(fmt::format("run_as_user {} must be a non-root uid (> 0)", o.run_as_user));
  }
  if (o.stop_grace < 1 || o.stop_grace > kMaxStopGrace) {
    throw UsageError(
        fmt::format("stop_grace {} is not in [1, {}] seconds", o.stop_grace, kMaxStopGrace));
  }
}

// The worker command after '--': a chexscale subcommand, without the flags render sets itself.
void check_worker_command(const std::vector<std::string>& command) {
  if (command.empty()) {
    throw UsageError("no worker command: give it after '--', e.g. -- bench --arch densenet121");
  }
  if (command_has_flag(command, "--stop-grace")) {
    throw UsageError(
        "the worker command's --stop-grace: give it to k8s render instead (--stop-grace), which "
        "passes it to the workers and sets the pods' terminationGracePeriodSeconds from it");
  }
  if (command.front() == "launch" || command.front() == "chexscale") {
    throw UsageError(
        "the worker command is a chexscale subcommand such as 'train' or 'bench' "
        "(each pod already runs 'chexscale launch')");
  }
}

// Elastic recovery: in place only for an elastic flavour of 2 or more pods training, a MIN:MAX
// range only with it, failures to survive, and a job token.
void check_elastic(const K8sRenderOptions& o) {
  if (o.elastic != K8sElastic::kAuto && !elastic_flavor(o)) {
    throw UsageError(fmt::format(
        "elastic '{}' with flavor {}: only the elastic flavours (pytorchjob-elastic, trainjob) "
        "have a recovery to choose",
        to_string(o.elastic), to_string(o.flavor)));
  }
  if (o.elastic == K8sElastic::kInPlace && o.nnodes < 2) {
    throw UsageError(fmt::format(
        "elastic in-place with nnodes {}: recovering in place needs 2 or more pods", o.nnodes));
  }
  if (o.elastic == K8sElastic::kInPlace && !o.command.empty() && o.command.front() != "train") {
    throw UsageError("elastic in-place with the worker command '" + o.command.front() +
                     "': only train's workers regroup in place (use --elastic restart)");
  }
  if (!in_place(o)) {
    if (o.min_nnodes != 0) {
      throw UsageError(fmt::format(
          "nnodes {}:{}: a range of pods needs an elastic flavour recovering in place (--flavor "
          "pytorchjob-elastic or trainjob, --elastic in-place)",
          o.min_nnodes, o.nnodes));
    }
    if (!o.rdzv_token_secret.empty()) {
      throw UsageError("rdzv_token_secret '" + o.rdzv_token_secret +
                       "': only a job recovering in place has a rendezvous server and a token");
    }
    return;
  }
  if (o.min_nnodes < 0 || min_pods(o) >= o.nnodes) {
    throw UsageError(
        fmt::format("nnodes {}:{}: MIN must be at least 1 and less than MAX to recover in place",
                    o.min_nnodes, o.nnodes));
  }
  if (o.max_restarts < 1) {
    throw UsageError(fmt::format(
        "max_restarts {}: recovering in place needs at least 1 (the failures the job survives)",
        o.max_restarts));
  }
  if (!o.rdzv_token_secret.empty()) {
    static const std::regex dns_subdomain(
        "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
    check_matches(o.rdzv_token_secret, dns_subdomain, "rdzv_token_secret", "a Secret's name");
  } else if (o.rdzv_token.empty() || o.rdzv_token.find_first_of("\r\n") != std::string::npos) {
    throw UsageError(
        "rdzv_token: a job recovering in place needs a one-line job token, or the name of a "
        "Secret that holds one (rdzv_token_secret)");
  }
}

}  // namespace

void K8sRenderOptions::validate() const {
  static const std::regex dns_label("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  static const std::regex dns_namespace("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  check_matches(job_name, dns_label, "job_name",
                "lower-case letters, digits and '-', starting with a letter");
  if (job_name.size() > kMaxJobNameLength) {
    throw UsageError("job_name '" + job_name + "': at most " + std::to_string(kMaxJobNameLength) +
                     " characters");
  }
  check_matches(namespace_name, dns_namespace, "namespace_name", "a DNS label");
  check_image(image);
  check_counts(*this);
  check_quantity(cpu, "cpu");
  check_quantity(memory, "memory");
  check_quantity(shm_size, "shm_size");
  check_mount_path(output_mount, "output_mount");
  check_mount_path(data_mount, "data_mount");
  if (!rdma_resource.empty()) parse_rdma_resource(rdma_resource);
  for (const auto& kv : node_selector)
    parse_key_value(kv, "node_selector");
  for (const auto& t : tolerations)
    parse_toleration(t);
  if (!queue.empty()) {
    check_matches(queue, dns_namespace, "queue", "a Kueue LocalQueue name (a DNS label)");
    if (scheduler == K8sScheduler::kVolcano) {
      throw UsageError(
          "queue '" + queue +
          "' with scheduler volcano: choose one gang scheduler (Kueue's queue or Volcano)");
    }
  }
  check_worker_command(command);
  check_elastic(*this);
}

}  // namespace chexscale::launch
