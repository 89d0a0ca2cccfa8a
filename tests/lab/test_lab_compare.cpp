// lab/compare.sh end to end on a small workload: bare metal (launch over the fabric), Kubernetes
// (rendered pods over the overlay, and on the host network) and the PyTorch DDP peer on both, then
// the report, whose numbers must agree with the bench files, and traffic counters that show which
// path each run took; the CPU accounting of every run and the report's section on it; the
// alternating rounds of --rounds; and a one-worker step whose cost does not depend on the size
// of the environment (which differs between the two systems' processes).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <vector>

#include "common/atomic_file.h"
#include "lab/lab_fixture.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

using nlohmann::json;

class LabCompare : public LabTest {
 protected:
  // lab/compare.sh on 2 nodes with ResNet-18 at 64 px, batch 4, 1 warm-up step, plus ARGS.
  ProcessResult compare(const std::string& args, const std::string& out) const {
    return run_shell(
        env() + " bash " + source_dir() +
        "/lab/compare.sh --nodes 2 --arch resnet18 --image-size 64 --batch 4 --warmup 1 "
        "--run-timeout 150 " +
        args + " --bin " + chexscale_bin() + " --out " + out);
  }
};

// The report's names of lab/compare.sh's sets: system and network, then the engine.
const std::string kBareNaive = "bare metal \u00b7 fabric \u00b7 naive allreduce";
const std::string kPodsNaive = "Kubernetes \u00b7 flannel overlay \u00b7 naive allreduce";
const std::string kHostnetNaive = "Kubernetes \u00b7 host network \u00b7 naive allreduce";
const std::string kBareDdp = "bare metal \u00b7 fabric \u00b7 PyTorch DDP";
const std::string kPodsDdp = "Kubernetes \u00b7 flannel overlay \u00b7 PyTorch DDP";
const std::string kPodsOverlapped = "Kubernetes \u00b7 flannel overlay \u00b7 overlapped allreduce";

json load(const std::string& path) {
  return json::parse(read_file(path));
}

// traffic.tsv rows "run node fabric_tx_bytes overlay_tx_bytes" -> {run/node: {fabric, overlay}}.
std::map<std::string, std::pair<long, long>> traffic(const std::string& path) {
  std::map<std::string, std::pair<long, long>> out;
  std::istringstream in(read_file(path));
  std::string run, node, header;
  std::getline(in, header);
  long fabric = 0, overlay = 0;
  while (in >> run >> node >> fabric >> overlay)
    out[run + "/" + node] = {fabric, overlay};
  return out;
}

// Checks the CPU accounting of a run (cpu-w<N>[-r<K>].json beside its bench file) against its
// bench file and the samples it was computed from (runs/<tag>/cpu-samples.tsv).
void expect_sane_cpu(const std::string& out, const std::string& cpu_file, const json& bench) {
  SCOPED_TRACE(cpu_file);
  const json cpu = load(cpu_file);
  EXPECT_EQ(cpu.at("schema"), "chexscale.lab-cpu/1");
  const int cpus = cpu.at("cpus");
  EXPECT_GE(cpus, 1);
  const json& run = cpu.at("windows").at("run");
  const json& timed = cpu.at("windows").at("timed");
  // The timed window is bench.json's elapsed_s, inside the run's window.
  EXPECT_NEAR(timed.at("seconds").get<double>(), bench.at("elapsed_s").get<double>(), 2e-3);
  EXPECT_GE(timed.at("start_unix_s").get<double>(), run.at("start_unix_s").get<double>());
  EXPECT_LE(timed.at("seconds").get<double>(), run.at("seconds").get<double>());
  for (const json* w : {&run, &timed}) {
    double total = 0;
    for (const char* f :
         {"user_s", "nice_s", "system_s", "idle_s", "iowait_s", "irq_s", "softirq_s", "steal_s"}) {
      EXPECT_GE(w->at(f).get<double>(), 0) << f;
      total += w->at(f).get<double>();
    }
    // Every CPU's time is in some field: the fields add up to cpus x seconds, up to the ticks
    // (1/100 s) counted at the window's ends.
    const double available = cpus * w->at("seconds").get<double>();
    EXPECT_NEAR(total, available, 0.1 * available + 0.05) << w->dump();
    // The run's own processes (the workers) computed, and used no more than the whole machine.
    const double run_cpu = w->at("run_user_s").get<double>() + w->at("run_system_s").get<double>();
    EXPECT_GT(w->at("run_user_s").get<double>(), 0) << w->dump();
    EXPECT_LE(run_cpu, total + 0.05) << w->dump();
  }
  // The samples: time strictly increasing, every counter monotonic.
  std::istringstream samples(
      read_file(out + "/runs/" + cpu.at("run").get<std::string>() + "/cpu-samples.tsv"));
  std::vector<double> previous;
  int n = 0;
  for (std::string line; std::getline(samples, line); ++n) {
    std::istringstream fields(line);
    std::vector<double> values;
    for (double v = 0; fields >> v;)
      values.push_back(v);
    ASSERT_EQ(values.size(), 13u) << line;
    for (size_t i = 0; i < values.size() && !previous.empty(); ++i) {
      if (i == 0) {
        EXPECT_GT(values[i], previous[i]) << "time of sample " << n;
      } else {
        EXPECT_GE(values[i], previous[i]) << "column " << i << " of sample " << n;
      }
    }
    previous = values;
  }
  EXPECT_EQ(n, cpu.at("samples").get<int>());
  EXPECT_GE(n, 2);
}

TEST_F(LabCompare, SmallComparisonEndToEnd) {
  TempDir dir;
  const std::string out = dir.path() + "/cmp";
  const ProcessResult r = compare("--steps 4 --variants naive,hostnet --peer", out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(namespaces().empty()) << "compare.sh left its lab up";

  // Each set's runs in report.json are the bench files' numbers.
  const json report = load(out + "/report/report.json");
  std::map<std::string, json> bench;  // "label/wN" -> bench.json
  for (const auto& set : report.at("sets")) {
    const std::string label = set.at("label");
    const std::string set_dir = set.at("source");  // out/sets/<system>-<variant>
    for (const auto& run : set.at("runs")) {
      const int w = run.at("workers");
      const json b = load(set_dir + "/bench-w" + std::to_string(w) + ".json");
      EXPECT_EQ(b.at("world_size"), w);
      EXPECT_EQ(b.at("arch"), "resnet18");
      EXPECT_DOUBLE_EQ(run.at("images_per_sec").get<double>(),
                       b.at("images_per_sec").get<double>());
      bench[label + "/w" + std::to_string(w)] = b;
      expect_sane_cpu(out, set_dir + "/cpu-w" + std::to_string(w) + ".json", b);
    }
  }
  ASSERT_EQ(bench.size(), 10u) << report.dump(2);
  // Gradients crossed veth links in the timed steps of the 2-worker runs: NET_RX softirqs.
  for (const char* set : {"bare-metal-naive", "kubernetes-naive", "kubernetes-hostnet"}) {
    const json cpu = load(out + "/sets/" + set + "/cpu-w2.json");
    EXPECT_GT(cpu.at("windows").at("timed").at("net_rx").get<double>(), 0) << set;
  }
  // The report's CPU section: a row per set and worker count, Kubernetes minus bare metal.
  const json& cpu_report = report.at("cpu");
  EXPECT_EQ(cpu_report.at("rows").size(), 10u) << cpu_report.dump(2);
  bool k8s_delta = false;
  for (const auto& d : cpu_report.at("deltas")) {
    if (d.at("label") == kPodsNaive && d.at("workers") == 2) {
      k8s_delta = d.at("reference") == kBareNaive;
    }
  }
  EXPECT_TRUE(k8s_delta) << cpu_report.dump(2);
  EXPECT_NE(read_file(out + "/report/report.md").find("## CPU time per step"), std::string::npos);
  const auto ips = [&](const std::string& key) {
    return bench.at(key).at("images_per_sec").get<double>();
  };
  EXPECT_EQ(bench.at(kBareNaive + "/w2").at("nnodes"), 2);
  EXPECT_EQ(bench.at(kPodsNaive + "/w2").at("nnodes"), 2);
  EXPECT_EQ(bench.at(kPodsNaive + "/w2").at("overlap"), false);
  EXPECT_EQ(bench.at(kHostnetNaive + "/w2").at("overlap"), false);  // the first variant's engine
  // The PyTorch DDP peer ran as a 2-node job on both systems, every rank to its end.
  EXPECT_EQ(bench.at(kBareDdp + "/w2").at("nnodes"), 2);
  EXPECT_EQ(bench.at(kPodsDdp + "/w2").at("nnodes"), 2);
  EXPECT_EQ(bench.at(kPodsDdp + "/w2").at("backend"), "gloo");
  for (const char* log : {"bare-metal-pytorch-ddp-w2-rank1", "kubernetes-pytorch-ddp-w2-rank1"}) {
    EXPECT_NE(read_file(out + "/logs/" + log + ".log").find("ddp_bench rank 1: done"),
              std::string::npos)
        << log;
  }
  // The peer's ranks multiply with the OpenBLAS kernels chexscale runs (it replaces OpenBLAS's
  // SSE3 fallback on CPUs OpenBLAS does not know; a peer without them would be slower for that).
  const std::string version = run_shell(chexscale_bin() + " version").output;
  const std::string kernels = openblas_kernels_in(version);
  ASSERT_FALSE(kernels.empty()) << version;
  std::istringstream run_commands(read_file(out + "/commands.txt"));
  int peer_ranks = 0;
  for (std::string line; std::getline(run_commands, line);) {
    if (line.find("ddp_bench.py") == std::string::npos) continue;
    ++peer_ranks;
    if (kernels.rfind("none", 0) == 0) {  // no OpenBLAS built for many CPUs: nothing to pass
      EXPECT_EQ(line.find("OPENBLAS_CORETYPE="), std::string::npos) << line;
    } else {
      EXPECT_NE(line.find(" OPENBLAS_CORETYPE=" + kernels + " "), std::string::npos) << line;
    }
  }
  EXPECT_EQ(peer_ranks, 6) << "on each system, one rank alone, then two";

  // Gaps and efficiencies recomputed from the bench files.
  const json& sets = report.at("sets");
  ASSERT_EQ(sets.at(0).at("label"), kBareNaive);
  ASSERT_EQ(sets.at(1).at("label"), kPodsNaive);
  ASSERT_EQ(sets.at(2).at("label"), kHostnetNaive);
  EXPECT_EQ(sets.at(2).at("source"), out + "/sets/kubernetes-hostnet");
  const double bm2 = ips(kBareNaive + "/w2");
  EXPECT_NEAR(sets[0]["runs"][1]["efficiency"].get<double>(), bm2 / (2 * ips(kBareNaive + "/w1")),
              1e-9);
  EXPECT_NEAR(sets[1]["runs"][1]["gap_pct"].get<double>(),
              100 * (bm2 - ips(kPodsNaive + "/w2")) / bm2, 1e-9);
  EXPECT_NEAR(sets[2]["runs"][1]["gap_pct"].get<double>(),
              100 * (bm2 - ips(kHostnetNaive + "/w2")) / bm2, 1e-9);
  EXPECT_EQ(sets[2].at("reference"), kBareNaive);
  EXPECT_EQ(report.at("variant_gaps").size(), 4u);
  for (const char* chart : {"throughput.png", "breakdown.png"}) {
    EXPECT_EQ(read_file(out + "/report/" + chart).substr(1, 3), "PNG") << chart;
  }
  EXPECT_NE(read_file(out + "/report/report.md").find(kHostnetNaive), std::string::npos);

  // Which path each run took: resnet18's gradients are ~45 MB a step, so a run that sent them
  // through the overlay shows megabytes on flannel.1; bare metal and host network show none.
  const auto t = traffic(out + "/traffic.tsv");
  for (const char* node : {"0", "1"}) {
    const std::string n = node;
    EXPECT_GT(t.at("kubernetes-naive-w2/" + n).second, 20'000'000) << "overlay unused by pods";
    EXPECT_LT(t.at("bare-metal-naive-w2/" + n).second, 100'000) << "bare metal used the overlay";
    EXPECT_GT(t.at("bare-metal-naive-w2/" + n).first, 20'000'000) << "bare metal not on the fabric";
    EXPECT_LT(t.at("kubernetes-hostnet-w2/" + n).second, 100'000)
        << "host network used the overlay";
    EXPECT_GT(t.at("kubernetes-pytorch-ddp-w2/" + n).second, 20'000'000) << "peer pods off overlay";
    EXPECT_LT(t.at("bare-metal-pytorch-ddp-w2/" + n).second, 100'000) << "peer used the overlay";
  }
  // The pods ran what the manifest says: the index from JOB_COMPLETION_INDEX, the Service name.
  const std::string commands = read_file(out + "/commands.txt");
  EXPECT_NE(commands.find("JOB_COMPLETION_INDEX=1"), std::string::npos) << commands;
  EXPECT_NE(commands.find("--master-addr chx-kubernetes-naive-w2-0."), std::string::npos)
      << commands;
  EXPECT_NE(commands.find("--master-addr 10.77.0.1"), std::string::npos) << commands;
}

// Bad choices of how to run the pods, of variants or of the workload are refused by name before a
// lab is made; --check checks good ones and makes nothing.
TEST_F(LabCompare, BadPodsModeImageAndVariantsAreRefusedByName) {
  TempDir dir;
  const struct {
    std::string args, message;
  } cases[] = {
      {"--pods vms", "--pods must be processes or containers, not 'vms'"},
      {"--image chexscale:0.1.0", "--image needs --pods containers"},
      {"--variants hostnet", "--variants 'hostnet' has no engine variant"},
      {"--variants naive,overlap", "unknown variant 'overlap'"},
      {"--variants powersgd4 --warmup 2", "variant 'powersgd4' needs --warmup 3 or more"},
      {"--peer-variants bucket5,naive", "--peer-variants: the peer has no 'naive'"},
      {"--peer-variants overlapped+noshm", "--peer-variants: the peer has no 'overlapped+noshm'"},
      {"--peer-variants fp17", "unknown variant 'fp17'"},
      {"--batch 0", "--batch must be a whole number >= 1, not '0'"},
  };
  for (const auto& c : cases) {
    const ProcessResult r = compare(c.args, dir.path() + "/bad");
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << ": " << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/bad/sets"));
  EXPECT_TRUE(namespaces().empty()) << "a refused comparison made a lab";

  // --check accepts good options and stops there: no lab, no output folder.
  const ProcessResult checked = compare(
      "--warmup 3 --variants naive,fp16+bucket5,powersgd4,overlapped+noshm,hostnet --peer "
      "--peer-variants powersgd4 "
      "--check",
      dir.path() + "/ok");
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(checked.output.find("options valid"), std::string::npos) << checked.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ok"));
  EXPECT_TRUE(namespaces().empty()) << "--check made a lab";
}

// The same one-worker bench under environments of different sizes (the pods' env is longer than
// bare metal's) takes the same number of page faults: glibc's adaptive malloc thresholds once
// made a step fault its activations in again or not depending on the heap's layout, which moves
// with the environment (172k vs 75k faults, 10 % of the throughput).
TEST_F(LabCompare, OneWorkerPageFaultsDoNotDependOnTheEnvironmentSize) {
  TempDir dir;
  const auto child_minor_faults = [] {
    rusage usage{};
    ::getrusage(RUSAGE_CHILDREN, &usage);
    return usage.ru_minflt;
  };
  long fewest = 0, most = 0;
  for (int pad : {0, 7, 15, 23, 31, 39}) {
    const long before = child_minor_faults();
    const ProcessResult r = run_shell(
        "env -i PATH=/usr/bin:/bin HOME=/tmp PAD=" + std::string(pad, 'x') + " " + chexscale_bin() +
        " bench --arch resnet18 --image-size 64 --batch-size 8 --steps 10 --warmup-steps 1"
        " --threads 1 --out " +
        dir.path() + "/pad" + std::to_string(pad));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const long faults = child_minor_faults() - before;
    fewest = fewest == 0 ? faults : std::min(fewest, faults);
    most = std::max(most, faults);
  }
  EXPECT_GT(fewest, 10'000);  // the run itself was counted
  // The bug more than doubled the faults; beside the rest of the suite the same runs' faults
  // moved by up to 11 % (71.9k to 79.6k), so the bound is 25 %.
  EXPECT_LT(most, fewest * 125 / 100) << "page faults from " << fewest << " to " << most;
}

// Two rounds: every round's bench files are kept, the systems' order alternates (bare metal first
// in round 1, Kubernetes first in round 2), and the report's gap is the median of the per-round
// gaps recomputed from the files (round K against round K).
TEST_F(LabCompare, RoundsAlternateTheSystemsAndReportMedianGaps) {
  TempDir dir;
  const std::string out = dir.path() + "/rounds";
  // Eight timed steps: the CPU accounting samples every 0.2 s, and two steps of this tiny model
  // (under 0.1 s) could fall between two samples on a busy machine, reading as no CPU at all.
  const ProcessResult r = compare("--steps 8 --variants overlapped --rounds 2", out);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const auto ips = [&](const std::string& set, int workers, int round) {
    const std::string suffix = std::to_string(workers) + "-r" + std::to_string(round) + ".json";
    const json b = load(out + "/sets/" + set + "/bench-w" + suffix);
    EXPECT_EQ(b.at("world_size"), workers);
    expect_sane_cpu(out, out + "/sets/" + set + "/cpu-w" + suffix, b);
    return b.at("images_per_sec").get<double>();
  };
  EXPECT_FALSE(std::filesystem::exists(out + "/sets/kubernetes-overlapped/bench-w2.json"));
  EXPECT_NE(read_file(out + "/README.txt").find("--variants overlapped --rounds 2"),
            std::string::npos)
      << "README.txt does not record the command line";

  // Order of the runs: commands.txt lists every command as it was started.
  const std::string commands = read_file(out + "/commands.txt");
  const auto started = [&](const std::string& tag) {
    const size_t at = commands.find("/runs/" + tag);
    EXPECT_NE(at, std::string::npos) << tag << " not run:\n" << commands;
    return at;
  };
  EXPECT_LT(started("bare-metal-single-w1-r1"), started("kubernetes-single-w1-r1"));
  EXPECT_LT(started("bare-metal-overlapped-w2-r1"), started("kubernetes-overlapped-w2-r1"));
  EXPECT_LT(started("kubernetes-overlapped-w2-r1"), started("kubernetes-single-w1-r2"));
  EXPECT_LT(started("kubernetes-single-w1-r2"), started("bare-metal-single-w1-r2"));
  EXPECT_LT(started("kubernetes-overlapped-w2-r2"), started("bare-metal-overlapped-w2-r2"));

  const json report = load(out + "/report/report.json");
  const json& k8s = report.at("sets").at(1);
  ASSERT_EQ(k8s.at("label"), kPodsOverlapped);
  for (int workers : {1, 2}) {
    const std::string set = workers == 1 ? "single" : "overlapped";
    const json& run = k8s.at("runs").at(workers - 1);
    ASSERT_EQ(run.at("workers"), workers);
    EXPECT_EQ(run.at("rounds"), 2);
    double gaps[2];
    for (int round : {1, 2}) {
      const double bm = ips("bare-metal-" + set, workers, round);
      gaps[round - 1] = 100 * (bm - ips("kubernetes-" + set, workers, round)) / bm;
      const json& rg = run.at("round_gaps").at(round - 1);
      EXPECT_EQ(rg.at("round"), round);
      EXPECT_NEAR(rg.at("gap_pct").get<double>(), gaps[round - 1], 1e-9);
    }
    EXPECT_NEAR(run.at("gap_pct").get<double>(), (gaps[0] + gaps[1]) / 2, 1e-9);
    EXPECT_NEAR(run.at("images_per_sec").get<double>(),
                (ips("kubernetes-" + set, workers, 1) + ips("kubernetes-" + set, workers, 2)) / 2,
                1e-9);
  }
  const json& gap = report.at("variant_gaps").at(0);
  EXPECT_EQ(gap.at("round_gaps").size(), 2u);
  EXPECT_LE(gap.at("gap_spread").at("min").get<double>(),
            gap.at("gap_spread").at("max").get<double>());
  EXPECT_NE(read_file(out + "/report/report.md").find("## Rounds"), std::string::npos);
  for (const auto& d : report.at("cpu").at("deltas")) {
    EXPECT_EQ(d.at("rounds"), 2) << d.dump();  // round K paired with round K
  }
  const auto t = traffic(out + "/traffic.tsv");
  EXPECT_GT(t.at("kubernetes-overlapped-w2-r2/1").second, 20'000'000)
      << "overlay unused in round 2";
}

}  // namespace
}  // namespace chexscale::test_util
