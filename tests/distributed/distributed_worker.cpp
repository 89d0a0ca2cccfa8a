// The dist tests' worker process: joins a job through the environment contract (like any
// chexscale worker) and runs one scenario on TinyNet, writing its results into a directory for
// the test to check. Independent of the training code on purpose.
//   distributed_worker grads DIR        one reduced step per reducer configuration, then 3 SGD
//   steps distributed_worker loop DIR STEPS   STEPS reduced steps (rank 0 writes DIR/progress after
//   each) distributed_worker stall DIR        rank 1 sleeps before its first collective
//   distributed_worker powersgd DIR     one step of rank-full PowerSGD per bucket layout, then
//                                       kPowerSgdSteps rank-1 steps at fixed weights (the sums of
//                                       the applied gradients after kPowerSgdEarlySteps and at the
//                                       end, and every rank's residuals); then kPowerSgdEarlySteps
//                                       of them twice, gradients zeroed or reset before each step
//   distributed_worker fail-once DIR    rank 1 exits 3 before joining if DIR/failed-once is absent
//                                (and creates it), else 3 steps of loop
//   distributed_worker send-from DIR    rank 1 sends 1,000,003 floats to ranks 0 and 3 only
//                                (send_from_), then one allreduce; each rank saves both results
//   distributed_worker shm DIR WHAT  node shared memory's allreduce alone (see run_shm)
//   distributed_worker sums DIR  sum allreduces of 1, 2, 7 and 2,621,447 elements (float32, and
//                                float16 for 7) of rank + i % 7, and a max allreduce of rank - i
//                                over 5 elements; each rank saves the results
// Env CHEXSCALE_TEST_COLLECTIVE_TIMEOUT (seconds, default 60) sets the watchdog's timeout,
// CHEXSCALE_TEST_BACKEND (default auto) the collective backend, CHEXSCALE_TEST_HIERARCHICAL=1 the
// hierarchical allreduce, and CHEXSCALE_TEST_RANKS_PER_NODE=L (for mpirun on one host) makes the
// ranks nodes of L (local rank = OMPI_COMM_WORLD_RANK % L).
#include <fmt/format.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <tuple>

#include "common/error.h"
#include "distributed/context.h"
#include "distributed/reducer.h"
#include "distributed/shared_memory_allreduce.h"
#include "distributed/tiny_net.h"
#include "test_util/worker_main.h"

namespace {

using namespace chexscale;
using test_util::TinyNet;

using test_util::kPowerSgdSteps;

struct Config {
  std::string name;
  distributed::ReducerOptions options;
};

std::vector<Config> configurations() {
  std::vector<Config> configs;
  for (bool overlap : {true, false}) {
    // 200 bytes: about one parameter per bucket (many buckets); 4 KiB: a few; 25 MiB: one.
    for (double mb : {0.0002, 0.004, 25.0}) {
      distributed::ReducerOptions o;
      o.overlap = overlap;
      o.bucket_mb = mb;
      o.first_bucket_mb = std::min(mb, 0.001);
      configs.push_back({fmt::format("{}-{}", overlap ? "overlap" : "after", mb), o});
    }
  }
  // Over Gloo's sockets although every rank is on this host (the others go through node shared
  // memory).
  for (const auto& [overlap, mb] : {std::pair{true, 0.004}, std::pair{false, 25.0}}) {
    distributed::ReducerOptions o;
    o.overlap = overlap;
    o.bucket_mb = mb;
    o.first_bucket_mb = std::min(mb, 0.001);
    o.shared_memory = false;
    configs.push_back({fmt::format("gloo-{}-{}", overlap ? "overlap" : "after", mb), o});
  }
  for (const char* compression : {"fp16", "bf16"}) {
    distributed::ReducerOptions o;
    o.bucket_mb = 0.004;
    o.compression = distributed::parse_compression(compression);
    configs.push_back({compression, o});
  }
  return configs;
}

TinyNet make_net(distributed::DistContext& ctx) {
  torch::manual_seed(17 + ctx.rank());  // different on purpose: the broadcast must fix it
  TinyNet net;
  distributed::broadcast_module(ctx, *net);
  return net;
}

std::vector<torch::Tensor> gradients(const TinyNet& net) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : net->parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().clone() : torch::full_like(p, NAN));
  }
  return grads;
}

// One reduced step; the gradients zeroed in place first (the reducer's slots: autograd adds into
// them), or with `fresh` reset (zero_grad(set_to_none): autograd makes its own, which the reducer
// copies, or PowerSGD's first sweep reads as they are made).
void one_step(distributed::DistContext& ctx, TinyNet& net, distributed::GradientReducer& reducer,
              int step, bool fresh = false) {
  for (auto& p : net->parameters()) {
    if (!p.grad().defined()) continue;
    if (fresh) {
      p.mutable_grad().reset();
    } else {
      p.mutable_grad().zero_();
    }
  }
  auto [x, y] = test_util::tiny_batch(ctx.rank(), step);
  reducer.prepare_for_backward();
  net->loss(x, y, ctx.rank() == 0).backward();
  reducer.finish();
}

void run_grads(const std::shared_ptr<distributed::DistContext>& ctx, const std::string& dir) {
  const std::string suffix = fmt::format(".rank{}.pt", ctx->rank());
  for (const Config& config : configurations()) {
    TinyNet net = make_net(*ctx);
    if (config.name == configurations().front().name) {
      auto params = net->parameters();
      torch::save(params, dir + "/initial" + suffix);
    }
    try {
      distributed::GradientReducer reducer(ctx, net->parameters(), config.options);
      std::ofstream(fmt::format("{}/{}.path.rank{}", dir, config.name, ctx->rank()))
          << (reducer.shared_memory() ? "shm" : "backend");
      one_step(*ctx, net, reducer, 0);  // gradients undefined: the reducer copies autograd's
      torch::save(gradients(net), dir + "/" + config.name + suffix);
      for (auto& p : net->parameters())
        p.mutable_grad().reset();  // zero_grad(set_to_none), LibTorch 2.x's default
      one_step(*ctx, net, reducer, 0);
      torch::save(gradients(net), dir + "/" + config.name + ".again" + suffix);
    } catch (const UsageError& e) {
      std::ofstream(dir + "/" + config.name + fmt::format(".rank{}.error", ctx->rank()))
          << e.what();
    }
  }
  TinyNet net = make_net(*ctx);
  distributed::ReducerOptions o;
  o.bucket_mb = 0.004;
  distributed::GradientReducer reducer(ctx, net->parameters(), o);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    one_step(*ctx, net, reducer, step);
    sgd.step();
  }
  auto params = net->parameters();
  torch::save(params, dir + "/trained" + suffix);
}

// The gradients by parameter from a PowerSGD state's "residual.<rank>.<id>" tensors (zeros for the
// parameters sent uncompressed).
std::vector<torch::Tensor> residuals_of(const distributed::CompressionState& state, int rank,
                                        const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    torch::Tensor r = torch::zeros_like(params[i]);
    for (const auto& [name, tensor] : state.tensors) {
      if (name == fmt::format("residual.{}.{}", rank, i)) r = tensor;
    }
    out.push_back(r);
  }
  return out;
}

void run_powersgd(const std::shared_ptr<distributed::DistContext>& ctx, const std::string& dir) {
  const std::string suffix = fmt::format(".rank{}.pt", ctx->rank());
  for (const auto& [name, mb, overlap] : {std::tuple{"overlap-0.0002", 0.0002, true},
                                          {"overlap-25", 25.0, true},
                                          {"after-25", 25.0, false}}) {
    TinyNet net = make_net(*ctx);
    distributed::ReducerOptions o;
    o.bucket_mb = mb;
    o.first_bucket_mb = std::min(mb, 0.001);
    o.overlap = overlap;
    o.compression = distributed::Compression::kPowerSgd;
    o.powersgd_rank = 64;  // >= min(rows, cols) of every TinyNet weight
    o.powersgd_min_rate = 0;
    o.powersgd_start_step = 0;
    distributed::GradientReducer reducer(ctx, net->parameters(), o);
    one_step(*ctx, net, reducer, 0);
    torch::save(gradients(net), fmt::format("{}/powersgd-full-{}{}", dir, name, suffix));
  }
  TinyNet net = make_net(*ctx);
  auto params = net->parameters();
  torch::save(params, dir + "/initial" + suffix);
  distributed::ReducerOptions o;
  o.bucket_mb = 0.004;
  o.compression = distributed::Compression::kPowerSgd;
  o.powersgd_rank = 1;
  o.powersgd_min_rate = 0;
  o.powersgd_start_step = 1;  // step 0 is a plain allreduce
  distributed::GradientReducer reducer(ctx, params, o);
  std::vector<torch::Tensor> applied;
  for (const auto& p : params)
    applied.push_back(torch::zeros_like(p));
  for (int step = 0; step < kPowerSgdSteps; ++step) {
    one_step(*ctx, net, reducer, step);
    for (size_t i = 0; i < params.size(); ++i)
      applied[i] += params[i].grad();
    if (step + 1 == test_util::kPowerSgdEarlySteps)
      torch::save(applied, dir + "/ef-early" + suffix);
  }
  torch::save(applied, dir + "/ef-sum" + suffix);
  const auto state = reducer.compression_state();
  if (ctx->rank() == 0) {
    for (int r = 0; r < ctx->world_size(); ++r)
      torch::save(residuals_of(*state, r, params), fmt::format("{}/ef-residual.rank{}.pt", dir, r));
  }

  // The same rank-1 steps from the same weights, gradients zeroed in place or reset before each:
  // every step's gradients, then the residuals.
  for (const bool fresh : {false, true}) {
    TinyNet same = make_net(*ctx);
    distributed::GradientReducer same_reducer(ctx, same->parameters(), o);
    std::vector<torch::Tensor> steps;
    for (int step = 0; step < test_util::kPowerSgdEarlySteps; ++step) {
      one_step(*ctx, same, same_reducer, step, fresh);
      for (const auto& g : gradients(same))
        steps.push_back(g);
    }
    const auto residuals = residuals_of(*same_reducer.compression_state(), ctx->rank(), params);
    steps.insert(steps.end(), residuals.begin(), residuals.end());
    torch::save(steps, fmt::format("{}/ef-{}{}", dir, fresh ? "fresh" : "zeroed", suffix));
  }
}

// Rank 1's tensor to ranks 0 and 3 only (4 ranks): every rank starts with its own values and
// saves what it holds after, and after one allreduce that follows (the collectives stay in step).
void run_send_from(const std::shared_ptr<distributed::DistContext>& ctx, const std::string& dir) {
  const int rank = ctx->rank();
  torch::Tensor t = torch::full({1000003}, static_cast<float>(-rank - 1));
  if (rank == 1) t = torch::arange(1000003, torch::kFloat);
  ctx->send_from_(t, 1, {0, 3});
  std::vector<torch::Tensor> sum{torch::full({3}, static_cast<float>(rank))};
  ctx->allreduce_sum_(sum);
  torch::save(std::vector<torch::Tensor>{t, sum[0]}, fmt::format("{}/sent.rank{}.pt", dir, rank));
}

// n elements of `dtype`, element i being rank + i % 7: the sums tests' values.
torch::Tensor rank_plus_i_mod_7(int rank, int64_t n, torch::Dtype dtype) {
  return (torch::arange(n, torch::kLong).remainder(7) + rank).to(dtype);
}

// Allreduces whose chunks on nodes of several ranks are uneven or empty, one at a time and then
// four submitted before any is waited on (queued behind each other): each rank saves what it
// got.
void run_sums(const std::shared_ptr<distributed::DistContext>& ctx, const std::string& dir) {
  const int rank = ctx->rank();
  std::vector<torch::Tensor> results;
  for (const auto& [n, dtype] : std::vector<std::pair<int64_t, torch::Dtype>>{
           {1, torch::kFloat}, {2, torch::kFloat}, {7, torch::kHalf}, {2621447, torch::kFloat}}) {
    std::vector<torch::Tensor> io{rank_plus_i_mod_7(rank, n, dtype)};
    ctx->allreduce_sum_(io);
    results.push_back(io[0]);
  }
  std::vector<torch::Tensor> io{rank - torch::arange(5, torch::kFloat)};
  c10d::AllreduceOptions max;
  max.reduceOp = c10d::ReduceOp::MAX;
  ctx->process_group()->allreduce(io, max)->wait();
  results.push_back(io[0]);
  std::vector<std::vector<torch::Tensor>> in_flight;
  in_flight.reserve(4);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (const int64_t n : {300007, 1, 5, 100003}) {
    in_flight.push_back({rank_plus_i_mod_7(rank, n, torch::kFloat)});
    works.push_back(ctx->process_group()->allreduce(in_flight.back()));
  }
  for (size_t i = 0; i < works.size(); ++i) {
    works[i]->wait();
    results.push_back(in_flight[i][0]);
  }
  torch::save(results, fmt::format("{}/sums.rank{}.pt", dir, rank));
}

// Node shared memory's allreduce alone (shared_memory_allreduce.h). `what`:
//   sums      float32 buffers of 1, 15, 17 and 1,000,003 elements and a float64 one of 33, each
//             element rank + i % 7, summed and divided by 1, then by the world size (two in flight)
//   mismatch  rank 0 allreduces its first buffer, the others their second; each saves its error
//   gone      rank 1 leaves once the segment is made; rank 0's allreduce saves its error and the
//             seconds it took
void run_shm(const std::shared_ptr<distributed::DistContext>& ctx, const std::string& dir,
             const std::string& what) {
  const int rank = ctx->rank(), world = ctx->world_size();
  std::string why_not;
  auto shm = distributed::SharedMemoryAllreduce::create(*ctx->store(), "test-shm/" + what, rank,
                                                        world, size_t{16} << 20, true, "",
                                                        std::chrono::seconds(60), &why_not);
  if (!shm) throw Error("no shared memory: " + why_not);
  const auto save_error = [&](const std::function<void()>& f) {
    const auto start = std::chrono::steady_clock::now();
    try {
      f();
    } catch (const std::exception& e) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::ofstream(fmt::format("{}/error.rank{}", dir, rank)) << e.what() << "\nseconds " << s;
    }
  };
  if (what == "sums") {
    std::vector<torch::Tensor> results;
    for (const auto& [n, type] :
         std::vector<std::pair<int64_t, torch::Dtype>>{{1, torch::kFloat},
                                                       {15, torch::kFloat},
                                                       {17, torch::kFloat},
                                                       {1000003, torch::kFloat},
                                                       {33, torch::kDouble}}) {
      torch::Tensor summed = shm->allocate(n, type).copy_(rank_plus_i_mod_7(rank, n, type));
      torch::Tensor averaged = shm->allocate(n, type).copy_(rank_plus_i_mod_7(rank, n, type));
      auto first = shm->allreduce(summed, 1.0);
      auto second = shm->allreduce(averaged, world);
      first->wait();
      second->wait();
      results.push_back(summed.clone());
      results.push_back(averaged.clone());
    }
    torch::save(results, fmt::format("{}/shm-sums.rank{}.pt", dir, rank));
  } else if (what == "mismatch") {
    torch::Tensor first = shm->allocate(100, torch::kFloat);
    torch::Tensor second = shm->allocate(50, torch::kFloat);
    save_error([&] { shm->allreduce(rank == 0 ? first : second, 1.0)->wait(); });
  } else if (what == "gone") {
    torch::Tensor t = shm->allocate(100, torch::kFloat);
    ctx->barrier();  // every rank has its segment
    if (rank == 1) std::_Exit(0);
    save_error([&] { shm->allreduce(t, 1.0)->wait(); });
    std::_Exit(0);  // not the job's teardown, which would wait for rank 1 in vain
  } else {
    throw UsageError("unknown shm test " + what);
  }
}

void run_loop(const std::shared_ptr<distributed::DistContext>& ctx, const std::string& dir,
              int steps) {
  TinyNet net = make_net(*ctx);
  distributed::ReducerOptions o;
  o.bucket_mb = 0.004;
  distributed::GradientReducer reducer(ctx, net->parameters(), o);
  for (int step = 0; step < steps; ++step) {
    one_step(*ctx, net, reducer, step);
    if (ctx->rank() == 0) std::ofstream(dir + "/progress") << step + 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The path the last step's allreduces took (--hierarchical=auto: the trial's choice).
  std::ofstream(dir + fmt::format("/path.rank{}", ctx->rank()))
      << (ctx->hierarchical() ? "hierarchical" : "flat");
  fmt::print("rank {} finished {} steps\n", ctx->rank(), steps);
}

int run(int argc, char** argv) {
  if (argc < 3)
    throw UsageError(
        "usage: distributed_worker grads|loop|stall|fail-once|powersgd|send-from|sums|shm DIR "
        "[STEPS|WHAT]");
  const std::string mode = argv[1], dir = argv[2];
  if (mode == "fail-once") {
    // Fails before joining, so the other ranks wait in the rendezvous until torn down.
    const std::string marker = dir + "/failed-once";
    const char* rank = std::getenv("RANK");
    if (rank != nullptr && std::string(rank) == "1" && !std::filesystem::exists(marker)) {
      std::ofstream(marker) << "1";
      fmt::print(stderr, "rank 1 fails on purpose (first attempt)\n");
      return 3;
    }
  }
  distributed::DistOptions options;
  if (const char* backend = std::getenv("CHEXSCALE_TEST_BACKEND")) {
    options.backend = distributed::parse_backend(backend);
  }
  const char* timeout = std::getenv("CHEXSCALE_TEST_COLLECTIVE_TIMEOUT");
  options.collective_timeout = std::chrono::seconds(timeout ? std::atoi(timeout) : 60);
  options.rdzv_timeout = std::chrono::seconds(60);
  if (const char* hierarchical = std::getenv("CHEXSCALE_TEST_HIERARCHICAL")) {
    options.hierarchical = std::string(hierarchical) == "auto" ? distributed::Hierarchical::kAuto
                                                               : distributed::Hierarchical::kOn;
  }
  const char* per_node = std::getenv("CHEXSCALE_TEST_RANKS_PER_NODE");
  const char* mpi_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (per_node != nullptr && mpi_rank != nullptr) {
    options.local_world_size = std::atoi(per_node);
    options.local_rank = std::atoi(mpi_rank) % options.local_world_size;
  }
  auto ctx = distributed::DistContext::init(options);
  if (mode == "grads") {
    run_grads(ctx, dir);
  } else if (mode == "loop") {
    run_loop(ctx, dir, argc > 3 ? std::atoi(argv[3]) : 10);
  } else if (mode == "stall") {
    if (ctx->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(8));
    ctx->barrier();
  } else if (mode == "fail-once") {
    run_loop(ctx, dir, 3);
  } else if (mode == "powersgd") {
    run_powersgd(ctx, dir);
  } else if (mode == "send-from") {
    run_send_from(ctx, dir);
  } else if (mode == "sums") {
    run_sums(ctx, dir);
  } else if (mode == "shm") {
    run_shm(ctx, dir, argc > 3 ? argv[3] : "sums");
  } else {
    throw UsageError("unknown mode " + mode);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return chexscale::test_util::worker_main("distributed_worker", run, argc, argv);
}
