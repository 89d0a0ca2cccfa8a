// lab/compare.sh --layouts with fixed-speed workers: nodes of several workers each on both
// systems. A 1x2 and a 2x2 layout (ResNet-18, 32 px) run as `launch --nproc-per-node 2` on bare
// metal and as one pod per node holding two workers on Kubernetes; every worker is in a CPU group
// of its own (node<i>-w<j>) that did the work; the workers of one node talk over its loopback
// (no fabric or overlay bytes in the 1x2 runs) and the 2x2 runs cross the fabric or the overlay;
// the bench files and the report have the layouts' worker and node counts; the PyTorch DDP peer
// runs the same layouts. Bad layouts are refused by name before the lab starts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

#include "common/atomic_file.h"
#include "lab/lab_fixture.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

using nlohmann::json;

class LabLayouts : public LabTest {
 protected:
  ProcessResult compare(const std::string& args, const std::string& out) const {
    return run_shell(env() + " bash " + source_dir() +
                     "/lab/compare.sh --arch resnet18 --image-size 32 --batch 4 --steps 2 "
                     "--warmup 1 --run-timeout 150 " +
                     args + " --bin " + chexscale_bin() + " --out " + out);
  }
};

// A tab-separated file's rows after its header, as "first/second" -> the remaining fields.
std::map<std::string, std::vector<double>> rows_of(const std::string& path) {
  std::map<std::string, std::vector<double>> out;
  std::istringstream in(read_file(path));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string a, b;
    fields >> a >> b;
    std::vector<double> values;
    for (double v; fields >> v;)
      values.push_back(v);
    out[a + "/" + b] = values;
  }
  return out;
}

TEST_F(LabLayouts, NodesOfTwoFixedSpeedWorkersOnBothSystems) {
  TempDir dir;
  const std::string out = dir.path() + "/cmp";
  const ProcessResult r =
      compare("--layouts 1x1,1x2,2x2 --variants overlapped --worker-cpu 0.3 --peer", out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(namespaces().empty()) << "compare.sh left its lab up";
  for (const std::string system : {"bare-metal", "kubernetes"}) {
    for (const auto& [workers, nodes] : {std::pair{1, 1}, {2, 1}, {4, 2}}) {
      const json bench = json::parse(read_file(out + "/sets/" + system + "-overlapped/bench-w" +
                                               std::to_string(workers) + ".json"));
      EXPECT_EQ(bench.at("world_size"), workers) << system;
      EXPECT_EQ(bench.at("nnodes"), nodes) << system << " " << workers;
    }
    // Every worker of the 2x2 run in its own group, each group's CPU time the work of one worker
    // (a 0.3 core quota over its run: more than nothing, less than the run's wall time allows).
    const auto quota = rows_of(out + "/quota.tsv");
    for (const char* group : {"node0-w0", "node0-w1", "node1-w0", "node1-w1"}) {
      const auto it = quota.find(system + "-overlapped-w4/" + group);
      ASSERT_NE(it, quota.end()) << system << " " << group << "\n" << read_file(out + "/quota.tsv");
      EXPECT_GT(it->second.at(1), 0.5) << system << " " << group << ": CPU seconds";
      EXPECT_GT(it->second.at(2), 0) << system << " " << group << ": never held at its quota";
    }
    EXPECT_EQ(quota.count(system + "-overlapped-w2/node1-w0"), 0u) << "1x2 runs on one node";
    // 1x2: the gradients stay on node 0's loopback; 2x2: they cross the fabric (bare metal) or
    // the overlay (Kubernetes). ResNet-18's 45 MB of gradients per step, 3 steps, 2 directions.
    const auto traffic = rows_of(out + "/traffic.tsv");
    const auto one_node = traffic.at(system + "-overlapped-w2/0");
    const auto two_nodes = traffic.at(system + "-overlapped-w4/0");
    const int path = system == "bare-metal" ? 0 : 1;  // fabric_tx_bytes, overlay_tx_bytes
    EXPECT_LT(one_node.at(0) + one_node.at(1), 1e6) << system << " 1x2 left its node";
    EXPECT_GT(two_nodes.at(path), 40e6) << system << " 2x2 did not cross between the nodes";
  }
  // The PyTorch DDP peer with the same layouts: two ranks per node, each in its worker's group.
  for (const std::string system : {"bare-metal", "kubernetes"}) {
    const json peer =
        json::parse(read_file(out + "/sets/" + system + "-pytorch-ddp/bench-w4.json"));
    EXPECT_EQ(peer.at("world_size"), 4) << system;
    EXPECT_EQ(peer.at("nnodes"), 2) << system;
    const auto quota = rows_of(out + "/quota.tsv");
    EXPECT_GT(quota.at(system + "-pytorch-ddp-w4/node1-w1").at(1), 0.5) << system;
  }
  const std::string md = read_file(out + "/report/report.md");
  EXPECT_NE(md.find("| 4 | 2 |"), std::string::npos) << md;  // workers 4 on 2 nodes
  EXPECT_NE(md.find("| 2 | 1 |"), std::string::npos) << md;
}

TEST_F(LabLayouts, BadLayoutsAreRefusedBeforeTheLabStarts) {
  TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {"--layouts 2by4", "'2by4' is not NODESxWORKERS"},
      {"--layouts 1x4,2x2", "two layouts with 4 workers"},
      {"--layouts 1x1", "no layout of two or more workers"},
      {"--nodes 3 --layouts 2x2", "--nodes and --layouts"},
  };
  for (const auto& [args, message] : cases) {
    const ProcessResult r = compare(args, dir.path() + "/bad");
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_TRUE(namespaces().empty());
}

}  // namespace
}  // namespace chexscale::test_util
