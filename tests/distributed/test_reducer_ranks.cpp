// The gradient reducer with real ranks: 2 and 3 processes over Gloo on loopback (the test worker).
// PowerSGD: see check_powersgd().
// After one step each averaged gradient must equal the single-process gradient of the
// concatenated batch (computed here, independently of the reducer), for overlap on/off, several
// bucket sizes and fp16 compression; after 3 SGD steps every rank holds identical weights.
// Hierarchical allreduce: the same checks with 4 ranks as 2 nodes of 2, over Gloo and under a real
// mpirun; ranks not numbered node by node are a usage error on every rank.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "common/torch_compat.h"
#include "distributed/tiny_net.h"
#include "test_util/helper_programs.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"
#include "test_util/worker_group.h"

namespace chexscale {
namespace {

using test_util::TinyNet;

using test_util::saved_tensors;

// The mean over ranks of each rank's loss, computed on the concatenated batch in one process.
torch::Tensor reference_loss(TinyNet& net, int world, int step) {
  std::vector<torch::Tensor> xs, ys;
  for (int r = 0; r < world; ++r) {
    auto [x, y] = test_util::tiny_batch(r, step);
    xs.push_back(x);
    ys.push_back(y);
  }
  const torch::Tensor f = net->features(torch::cat(xs));
  const torch::Tensor rank0_features = f.narrow(0, 0, test_util::kTinyBatch).detach();
  return torch::binary_cross_entropy_with_logits(net->fc(f), torch::cat(ys)) +
         net->aux(rank0_features).pow(2).mean() / world;
}

TinyNet net_with(const std::vector<torch::Tensor>& weights) {
  TinyNet net;
  torch::NoGradGuard no_grad;
  auto params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    params[i].copy_(weights[i]);
  return net;
}

std::vector<torch::Tensor> reference_gradients(const std::vector<torch::Tensor>& initial,
                                               int world) {
  TinyNet net = net_with(initial);
  reference_loss(net, world, 0).backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : net->parameters()) {
    grads.push_back(p.grad().defined() ? p.grad() : torch::zeros_like(p));
  }
  return grads;
}

std::vector<torch::Tensor> reference_training(const std::vector<torch::Tensor>& initial,
                                              int world) {
  TinyNet net = net_with(initial);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    sgd.zero_grad();
    reference_loss(net, world, step).backward();
    sgd.step();
  }
  return net->parameters();
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// What the `grads` workers of a job of `world` ranks left in `dir`, against the single process.
// `sums_bf16`: the backend sums bfloat16 (mpi; Gloo from LibTorch 2.0), else bf16 must be refused.
// `path`: how the float buckets of the default configurations travelled, "shm" (node shared
// memory) or "backend" (the process group); the gloo-* ones always over the backend, and with two
// ranks to the same bits as the default ones (a + b is b + a).
void check_gradient_files(const test_util::TempDir& dir, int world,
                          bool sums_bf16 = CHEXSCALE_TORCH_AT_LEAST(2, 0),
                          const std::string& path = "shm") {
  const std::string rank0 = ".rank0.pt";
  const auto initial = saved_tensors(dir.path() + "/initial" + rank0);
  for (int r = 1; r < world; ++r) {
    const auto theirs = saved_tensors(dir.path() + "/initial.rank" + std::to_string(r) + ".pt");
    for (size_t i = 0; i < initial.size(); ++i) {
      EXPECT_TRUE(torch::equal(initial[i], theirs[i])) << "broadcast: parameter " << i;
    }
  }
  const auto want = reference_gradients(initial, world);
  const auto names = TinyNet()->named_parameters().keys();
  for (const std::string config :
       {"overlap-0.0002", "overlap-0.004", "overlap-25", "after-0.0002", "after-0.004", "after-25",
        "gloo-overlap-0.004", "gloo-after-25", "fp16"}) {
    const bool over_backend = config == "fp16" || config.rfind("gloo-", 0) == 0;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(test_util::file_contents(fmt::format("{}/{}.path.rank{}", dir.path(), config, r)),
                over_backend ? "backend" : path)
          << config << " rank " << r;
    }
    // ".again": a second backward after the gradients were reset to undefined (zero_grad with
    // set_to_none), so the reducer had to re-attach its bucket slots.
    for (int r = 0; r < 2 * world; ++r) {
      const std::string file = fmt::format("{}/{}{}.rank{}.pt", dir.path(), config,
                                           r < world ? "" : ".again", r % world);
      const auto got = saved_tensors(file);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const double tolerance =
            config == "fp16" ? 2e-3 * want[i].abs().max().item<double>() + 1e-5 : 1e-5;
        EXPECT_LE(max_abs_diff(got[i], want[i]), tolerance) << file << " " << names[i];
      }
    }
  }
  if (world == 2) {
    for (const auto& [mine, gloo] : {std::pair{"overlap-0.004", "gloo-overlap-0.004"},
                                     std::pair{"after-25", "gloo-after-25"}}) {
      const auto a = saved_tensors(fmt::format("{}/{}{}", dir.path(), mine, rank0));
      const auto b = saved_tensors(fmt::format("{}/{}{}", dir.path(), gloo, rank0));
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(torch::equal(a[i], b[i])) << mine << " against " << gloo << " " << names[i];
    }
  }
  // The never-used head must come back as zeros, not garbage or NaN.
  const auto unused = saved_tensors(dir.path() + "/overlap-0.004" + rank0);
  EXPECT_EQ(unused[unused.size() - 1].abs().sum().item<double>(), 0.0);
  EXPECT_GT(want[0].abs().sum().item<double>(), 0.0);

  const std::string bf16_error = dir.path() + "/bf16.rank0.error";
  if (sums_bf16) {
    ASSERT_FALSE(std::filesystem::exists(bf16_error)) << test_util::file_contents(bf16_error);
    const auto got = saved_tensors(dir.path() + "/bf16" + rank0);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_LE(max_abs_diff(got[i], want[i]), 2e-2 * want[i].abs().max().item<double>() + 1e-4);
    }
  } else {
    // LibTorch 1.13's Gloo cannot sum bfloat16: a usage error that says so on every rank.
    const std::string message = test_util::file_contents(bf16_error);
    EXPECT_NE(message.find("cannot allreduce bf16"), std::string::npos) << message;
  }

  const auto trained = saved_tensors(dir.path() + "/trained" + rank0);
  const auto expected = reference_training(initial, world);
  for (int r = 1; r < world; ++r) {
    const auto theirs = saved_tensors(dir.path() + "/trained.rank" + std::to_string(r) + ".pt");
    for (size_t i = 0; i < trained.size(); ++i) {
      EXPECT_TRUE(torch::equal(trained[i], theirs[i])) << "rank " << r << " " << names[i];
    }
  }
  for (size_t i = 0; i < trained.size(); ++i) {
    EXPECT_LE(max_abs_diff(trained[i], expected[i]), 1e-5) << names[i];
  }
}

void check_job(int world) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"grads", dir.path()}, world,
                             dir.path());
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < world; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  check_gradient_files(dir, world);
}

// PowerSGD with real ranks: a rank-full approximation is the plain average (every bucket layout,
// overlap on and off); at rank 1 the error feedback accounts for every gradient (what was applied
// plus the mean residual is the sum of the averaged gradients), and the applied sum converges to
// the uncompressed one.
void check_powersgd(int world) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"powersgd", dir.path()}, world,
                             dir.path());
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < world; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  const auto initial = saved_tensors(dir.path() + "/initial.rank0.pt");
  const auto names = TinyNet()->named_parameters().keys();
  const auto want = reference_gradients(initial, world);
  for (const std::string config : {"overlap-0.0002", "overlap-25", "after-25"}) {
    for (int r = 0; r < world; ++r) {
      const auto got =
          saved_tensors(fmt::format("{}/powersgd-full-{}.rank{}.pt", dir.path(), config, r));
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(max_abs_diff(got[i], want[i]), 1e-4 * want[i].abs().max().item<double>() + 1e-6)
            << config << " rank " << r << " " << names[i];
      }
    }
  }

  std::vector<torch::Tensor> wanted_sum, wanted_early;
  {
    TinyNet net = net_with(initial);
    for (int step = 0; step < test_util::kPowerSgdSteps; ++step) {
      for (auto& p : net->parameters()) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      reference_loss(net, world, step).backward();
      auto params = net->parameters();
      if (wanted_sum.empty()) {
        for (const auto& p : params)
          wanted_sum.push_back(torch::zeros_like(p));
      }
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].grad().defined()) wanted_sum[i] += params[i].grad();
      }
      if (step + 1 == test_util::kPowerSgdEarlySteps) {
        for (const auto& t : wanted_sum)
          wanted_early.push_back(t.clone());
      }
    }
  }
  const auto applied = saved_tensors(dir.path() + "/ef-sum.rank0.pt");
  const auto applied_early = saved_tensors(dir.path() + "/ef-early.rank0.pt");
  for (int r = 1; r < world; ++r) {
    const auto theirs = saved_tensors(fmt::format("{}/ef-sum.rank{}.pt", dir.path(), r));
    for (size_t i = 0; i < applied.size(); ++i)
      EXPECT_TRUE(torch::equal(applied[i], theirs[i])) << "rank " << r << " " << names[i];
  }
  std::vector<torch::Tensor> mean_residual;
  for (size_t i = 0; i < applied.size(); ++i)
    mean_residual.push_back(torch::zeros_like(applied[i]));
  for (int r = 0; r < world; ++r) {
    const auto residual = saved_tensors(fmt::format("{}/ef-residual.rank{}.pt", dir.path(), r));
    for (size_t i = 0; i < residual.size(); ++i)
      mean_residual[i] += residual[i] / world;
  }
  for (const size_t i : {0, 2, 4}) {  // conv1, conv2 and fc weights: compressed at rank 1
    const double scale = wanted_sum[i].abs().max().item<double>();
    EXPECT_LE(max_abs_diff(applied[i] + mean_residual[i], wanted_sum[i]), 1e-4 * scale) << names[i];
    const double early =
        ((applied_early[i] - wanted_early[i]).norm() / wanted_early[i].norm()).item<double>();
    const double error =
        ((applied[i] - wanted_sum[i]).norm() / wanted_sum[i].norm()).item<double>();
    EXPECT_GT(early, 0.01) << names[i] << ": rank 1 should not be exact";
    EXPECT_LT(error, early / 4) << names[i] << " after " << test_util::kPowerSgdEarlySteps
                                << " steps: " << early;
  }

  // Gradients reset before each step reach PowerSGD's first sweep straight from autograd, zeroed
  // ones through the bucket: the same bits at every step, and the same residuals.
  for (int r = 0; r < world; ++r) {
    const auto zeroed = saved_tensors(fmt::format("{}/ef-zeroed.rank{}.pt", dir.path(), r));
    const auto fresh = saved_tensors(fmt::format("{}/ef-fresh.rank{}.pt", dir.path(), r));
    ASSERT_EQ(zeroed.size(), (test_util::kPowerSgdEarlySteps + 1) * names.size());
    ASSERT_EQ(fresh.size(), zeroed.size());
    for (size_t i = 0; i < zeroed.size(); ++i) {
      EXPECT_TRUE(torch::equal(zeroed[i], fresh[i]))
          << "rank " << r << (i / names.size() < test_util::kPowerSgdEarlySteps ? " step " : " ")
          << (i / names.size() < test_util::kPowerSgdEarlySteps ? std::to_string(i / names.size())
                                                                : std::string("residual"))
          << " " << names[i % names.size()];
    }
  }
}

TEST(ReducerPowerSgd, TwoRanksRankFullIsExactAndErrorFeedbackConverges) {
  check_powersgd(2);
}

TEST(ReducerPowerSgd, ThreeRanksRankFullIsExactAndErrorFeedbackConverges) {
  check_powersgd(3);
}

TEST(ReducerGradients, TwoRanksMatchSingleProcessForEveryConfiguration) {
  check_job(2);
}

TEST(ReducerGradients, ThreeRanksMatchSingleProcessForEveryConfiguration) {
  check_job(3);
}

// The `grads` job of two ranks, each in a mount namespace of its own whose /dev/shm is a new tmpfs
// of `size`: the buckets cannot share memory, go over Gloo with the same results, and rank 0's log
// says why (`reason`).
void check_job_without_shared_dev_shm(const std::string& size, const std::string& reason) {
  ASSERT_EQ(::geteuid(), 0) << "needs root: mounts a tmpfs on /dev/shm in a mount namespace";
  test_util::TempDir dir;
  test_util::WorkerGroup job(
      "/usr/bin/unshare",
      {"-m", "sh", "-c", "mount -t tmpfs -o size=" + size + R"( tmpfs /dev/shm && exec "$0" "$@")",
       test_util::distributed_worker(), "grads", dir.path()},
      2, dir.path());
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  check_gradient_files(dir, 2, CHEXSCALE_TORCH_AT_LEAST(2, 0), "backend");
  const std::string warning = "instead of node shared memory: " + reason;
  EXPECT_NE(exits[0].output.find(warning), std::string::npos) << exits[0].output;
}

TEST(ReducerSharedMemory, ADevShmTooSmallFallsBackToGlooAndSaysSo) {
  check_job_without_shared_dev_shm("1m", "rank 0: /dev/shm cannot hold");
}

TEST(ReducerSharedMemory, RanksWithoutACommonDevShmFallBackToGlooAndSaySo) {
  check_job_without_shared_dev_shm("64m", "rank 1: shm_open");
}

// Two nodes of two ranks on this host: node reduce-scatter over loopback, each rank's chunk
// allreduced across the nodes, node allgather.
TEST(ReducerHierarchical, GlooFourRanksAsTwoNodesMatchSingleProcess) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"grads", dir.path()}, 4, dir.path(),
                             {{"CHEXSCALE_TEST_HIERARCHICAL", "1"}}, 2);
  const auto exits = job.wait_all(std::chrono::seconds(180));
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  for (int r = 0; r < 4; ++r) {
    const std::string log = test_util::file_contents(fmt::format("{}/rank{}.log", dir.path(), r));
    const std::string want =
        fmt::format("hierarchical allreduce: node {} of 2, local rank {} of 2", r / 2, r % 2);
    EXPECT_NE(log.find(want), std::string::npos) << "rank " << r << ":\n" << log;
  }
  check_gradient_files(dir, 4, CHEXSCALE_TORCH_AT_LEAST(2, 0), "backend");
}

// --hierarchical=auto on two nodes of two: the trial's first two steps (flat, then hierarchical)
// give every configuration's gradients, and after the trial (6 steps) every rank keeps the same
// path, the one rank 0 names, and steps on with it.
TEST(ReducerHierarchical, GlooAutoGivesTheGradientsOfBothPathsAndOneChoiceOnEveryRank) {
  test_util::TempDir grads;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"grads", grads.path()}, 4,
                             grads.path(), {{"CHEXSCALE_TEST_HIERARCHICAL", "auto"}}, 2);
  const auto exits = job.wait_all(std::chrono::seconds(180));
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  const std::string grads_log = test_util::file_contents(grads.path() + "/rank0.log");
  EXPECT_NE(grads_log.find("tried against the flat ring on the first 6 steps"), std::string::npos)
      << grads_log;
  check_gradient_files(grads, 4, CHEXSCALE_TORCH_AT_LEAST(2, 0), "backend");

  test_util::TempDir dir;
  test_util::WorkerGroup loop(test_util::distributed_worker(), {"loop", dir.path(), "8"}, 4,
                              dir.path(), {{"CHEXSCALE_TEST_HIERARCHICAL", "auto"}}, 2);
  const auto loop_exits = loop.wait_all(std::chrono::seconds(180));
  for (int r = 0; r < 4; ++r)
    ASSERT_EQ(loop_exits[r].exit_code, 0) << loop_exits[r].output;
  const std::string path = test_util::file_contents(dir.path() + "/path.rank0");
  ASSERT_TRUE(path == "flat" || path == "hierarchical") << path;
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(test_util::file_contents(fmt::format("{}/path.rank{}", dir.path(), r)), path) << r;
  const std::string log = test_util::file_contents(dir.path() + "/rank0.log");
  EXPECT_NE(
      log.find(fmt::format("(mean of 2 steps each over 4 ranks; hierarchical when 10 % faster): "
                           "the {} allreduce is kept",
                           path)),
      std::string::npos)
      << log;
}

// The sums of run_sums in distributed_worker.cpp in each rank's file: `world` ranks add up
// rank + i % 7.
void check_sums(const test_util::TempDir& dir, int world) {
  const int rank_sum = world * (world - 1) / 2;
  const auto want = [&](int64_t n, torch::Dtype dtype) {
    return (torch::arange(n, torch::kLong).remainder(7) * world + rank_sum).to(dtype);
  };
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    const auto got = test_util::saved_tensors(fmt::format("{}/sums.rank{}.pt", dir.path(), r));
    ASSERT_EQ(got.size(), 9u);
    EXPECT_TRUE(torch::equal(got[0], want(1, torch::kFloat))) << got[0];
    EXPECT_TRUE(torch::equal(got[1], want(2, torch::kFloat))) << got[1];
    EXPECT_TRUE(torch::equal(got[2], want(7, torch::kHalf))) << got[2];
    // 10 MB of float after 7 halves: the node exchange's kept buffer grows and changes type.
    EXPECT_TRUE(torch::equal(got[3], want(2621447, torch::kFloat)));
    // max over ranks of rank - i: the last rank's.
    EXPECT_TRUE(torch::equal(got[4], (world - 1) - torch::arange(5, torch::kFloat))) << got[4];
    // Four in flight at once, waited in order.
    EXPECT_TRUE(torch::equal(got[5], want(300007, torch::kFloat)));
    EXPECT_TRUE(torch::equal(got[6], want(1, torch::kFloat))) << got[6];
    EXPECT_TRUE(torch::equal(got[7], want(5, torch::kFloat))) << got[7];
    EXPECT_TRUE(torch::equal(got[8], want(100003, torch::kFloat)));
  }
}

// Two nodes of three: chunks of uneven sizes, and empty ones (a 1-element tensor leaves two of a
// node's three ranks nothing to send across), over Gloo.
TEST(ReducerHierarchical, GlooTwoNodesOfThreeSumUnevenAndEmptyChunks) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"sums", dir.path()}, 6, dir.path(),
                             {{"CHEXSCALE_TEST_HIERARCHICAL", "1"}, {"OMP_NUM_THREADS", "1"}}, 3);
  const auto exits = job.wait_all(std::chrono::seconds(180));
  for (int r = 0; r < 6; ++r)
    EXPECT_EQ(exits[r].exit_code, 0) << "rank " << r << ":\n" << exits[r].output;
  if (HasFailure()) return;
  const std::string log = test_util::file_contents(dir.path() + "/rank5.log");
  EXPECT_NE(log.find("hierarchical allreduce: node 1 of 2, local rank 2 of 3"), std::string::npos)
      << log;
  check_sums(dir, 6);
}

// One node: the hierarchical allreduce would be the flat one, which is kept (and said so).
TEST(ReducerHierarchical, OneNodeKeepsTheFlatAllreduce) {
  test_util::TempDir dir;
  test_util::WorkerGroup job(test_util::distributed_worker(), {"loop", dir.path(), "2"}, 2,
                             dir.path(), {{"CHEXSCALE_TEST_HIERARCHICAL", "1"}});
  const auto exits = job.wait_all(std::chrono::seconds(120));
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(exits[r].exit_code, 0) << exits[r].output;
  const std::string log = test_util::file_contents(dir.path() + "/rank0.log");
  EXPECT_NE(log.find("the flat allreduce is the same, kept"), std::string::npos) << log;
  EXPECT_EQ(log.find("hierarchical allreduce: node"), std::string::npos) << log;
}

// Ranks numbered round robin (rank 1 on the second node): every rank refuses, naming the rule.
TEST(ReducerHierarchical, RanksNotNumberedNodeByNodeAreAUsageError) {
  test_util::TempDir dir;
  const int port = distributed::pick_free_port();
  std::vector<test_util::ProcessSpec> specs;
  for (int rank = 0; rank < 4; ++rank) {
    specs.push_back(
        {{test_util::distributed_worker(), "loop", dir.path(), "1"},
         test_util::environment_with(
             {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "WORLD_SIZE=4",
              "RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank / 2),
              "LOCAL_WORLD_SIZE=2", "CHEXSCALE_TEST_HIERARCHICAL=1"}),
         fmt::format("{}/rank{}.log", dir.path(), rank)});
  }
  const auto exits = test_util::run_processes(std::move(specs), std::chrono::seconds(120));
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(exits[r].exit_code, 1) << exits[r].output;  // worker_main: the error, exit 1
    EXPECT_NE(exits[r].output.find("--hierarchical needs ranks numbered node by node"),
              std::string::npos)
        << exits[r].output;
  }
}

#ifdef CHEXSCALE_MPIEXEC
// Runs distributed_worker MODE as two nodes of two under a real mpirun with the hierarchical
// allreduce, and checks that it ended well and that rank 3 knew its place.
void run_two_nodes_of_two_under_mpirun(const char* mode, const test_util::TempDir& dir) {
  const auto result = test_util::run_processes(
      {{{CHEXSCALE_MPIEXEC, "-np", "4", "--oversubscribe", "--allow-run-as-root", "--mca",
         "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
         test_util::distributed_worker(), mode, dir.path()},
        test_util::environment_with(
            {"CHEXSCALE_TEST_BACKEND=mpi", "CHEXSCALE_TEST_HIERARCHICAL=1",
             "CHEXSCALE_TEST_RANKS_PER_NODE=2", "OMP_NUM_THREADS=1", "MASTER_ADDR=127.0.0.1",
             "MASTER_PORT=" + std::to_string(distributed::pick_free_port())}),
        dir.path() + "/mpirun.log"}},
      std::chrono::seconds(240));
  ASSERT_EQ(result[0].exit_code, 0) << result[0].output;
  EXPECT_NE(result[0].output.find("hierarchical allreduce: node 1 of 2, local rank 1 of 2"),
            std::string::npos)
      << result[0].output;
}

// The same two nodes of two under a real mpirun: MPI_COMM_WORLD split by node and by local rank.
TEST(ReducerHierarchical, MpiFourRanksAsTwoNodesMatchSingleProcess) {
  test_util::TempDir dir;
  run_two_nodes_of_two_under_mpirun("grads", dir);
  if (HasFatalFailure()) return;
  check_gradient_files(dir, 4, /*sums_bf16=*/true, "backend");
}

// Two nodes of two under a real mpirun: MPI_Reduce_scatter and MPI_Allgatherv of uneven chunks
// inside the node, and an empty one (1 element over 2 ranks).
TEST(ReducerHierarchical, MpiTwoNodesOfTwoSumUnevenAndEmptyChunks) {
  test_util::TempDir dir;
  run_two_nodes_of_two_under_mpirun("sums", dir);
  if (HasFatalFailure()) return;
  check_sums(dir, 4);
}
#endif

}  // namespace
}  // namespace chexscale
