// The MPI process group: c10d collectives (allreduce, reduce, broadcast, allgather,
// reduce_scatter, barrier) on the MPI library the job was started with (OpenMPI under mpirun, or
// srun --mpi=pmix), built only when
// CMake finds MPI (process_group_no_mpi.cpp stands in otherwise). As in PyTorch's ProcessGroupMPI,
// MPI runs at MPI_THREAD_SERIALIZED and one progress thread per group makes every MPI call, in the
// order the collectives were submitted (collective_queue.h): each call returns at once with a Work
// that completes (or holds MPI's error as an exception) when the thread has run it. Every rank must
// submit the same collectives in the same order, as the reducer and DistContext do. The collective
// timeout is the watchdog's (Work::wait with a timeout); MPI itself never gives up on a collective.
// Allreduce is MPI_Allreduce inside one node and chexscale's ring (mpi_ring.h) across nodes.
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>

#include "common/error.h"
#include "common/log.h"
#include "distributed/collective_queue.h"
#include "distributed/kept_buffer.h"
#include "distributed/mpi_datatypes.h"
#include "distributed/mpi_ring.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {
namespace {

// Held around every MPI call of the process, so that groups and their setup never call MPI at
// the same time (MPI_THREAD_SERIALIZED).
std::mutex& mpi_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Groups whose progress thread may still call MPI; MPI_Finalize waits for none.
std::atomic<int> live_groups{0};

// A group that failed is left alive on purpose (its thread may be inside a collective that never
// ends): MPI cannot be finalized under it, so such a process exits without MPI_Finalize.
void finalize_at_exit() {
  if (live_groups.load() != 0) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void init_mpi_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
              "MPI_Init_thread");
    TORCH_CHECK(provided >= MPI_THREAD_SERIALIZED, "this MPI library gives thread level ", provided,
                ", below MPI_THREAD_SERIALIZED, which the progress thread needs");
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    create_half_ops();
    std::atexit(finalize_at_exit);
  });
}

// One CPU tensor that MPI can read and write in place.
const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "mpi ", what, " takes one tensor, got ", tensors.size());
  const at::Tensor& t = tensors[0];
  TORCH_CHECK(t.device().is_cpu(), "mpi ", what, " takes CPU tensors, got one on ", t.device());
  TORCH_CHECK(t.layout() == c10::kStrided && t.is_contiguous(), "mpi ", what,
              " takes dense contiguous tensors");
  TORCH_CHECK(t.numel() <= INT_MAX, "mpi ", what, " moves at most ", INT_MAX, " elements, not ",
              t.numel());
  return t;
}

int count_of(const at::Tensor& t) {
  return static_cast<int>(t.numel());
}

// Whether the group's allreduce runs the ring: asked for, or (auto) its ranks are on more than
// one node, where MPI's allreduce over TCP is slow; inside a node MPI's shared memory is faster.
// Collective over `comm`; every rank gets the same answer. Call under the MPI lock.
bool allreduce_by_ring(MPI_Comm comm, int size, MpiAllreduce requested) {
  if (requested != MpiAllreduce::kAuto) return requested == MpiAllreduce::kRing;
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int node_size = 0;
  check_mpi(MPI_Comm_size(node, &node_size), "MPI_Comm_size");
  MPI_Comm_free(&node);
  return node_size < size;
}

const char* allreduce_name(bool ring) {
  return ring ? "chexscale's ring of point-to-point messages" : "MPI_Allreduce";
}

class MpiProcessGroup final : public compat::CollectiveGroup {
 public:
  MpiProcessGroup(MPI_Comm comm, int rank, int size, bool ring)
      : compat::CollectiveGroup(rank, size),
        comm_(comm),
        ring_(ring ? std::make_unique<MpiRing>(comm, rank, size) : nullptr),
        progress_(std::make_unique<CollectiveQueue>()) {
    ++live_groups;
  }

  // Runs what was submitted, then frees the communicator.
  ~MpiProcessGroup() override {
    progress_.reset();
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      MPI_Comm_free(&comm_);
    }
    --live_groups;
  }

  const std::string getBackendName() const override { return "mpi"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    const at::Tensor t = single_tensor(tensors, "allreduce");
    const MPI_Datatype type = mpi_datatype(t.scalar_type());
    const MPI_Op op = mpi_op(opts.reduceOp, t.scalar_type());
    return enqueue(c10d::OpType::ALLREDUCE, {t}, [this, t, type, op] {
      if (ring_) {
        ring_->allreduce(t.data_ptr(), t.numel(), type, t.element_size(), op);
        return;
      }
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t), type, op, comm_),
                "MPI_Allreduce");
    });
  }

  // The sum (or min, max, product) of every rank's tensor lands in the root's tensor; the others'
  // tensors are left as they were.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    const at::Tensor t = single_tensor(tensors, "reduce");
    const MPI_Datatype type = mpi_datatype(t.scalar_type());
    const MPI_Op op = mpi_op(opts.reduceOp, t.scalar_type());
    const int root = static_cast<int>(opts.rootRank);
    return enqueue(c10d::OpType::REDUCE, {t}, [this, t, type, op, root] {
      const void* send = rank_ == root ? MPI_IN_PLACE : t.data_ptr();
      check_mpi(MPI_Reduce(send, t.data_ptr(), count_of(t), type, op, root, comm_), "MPI_Reduce");
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    const at::Tensor t = single_tensor(tensors, "broadcast");
    const MPI_Datatype type = mpi_datatype(t.scalar_type());
    const int root = static_cast<int>(opts.rootRank);
    return enqueue(c10d::OpType::BROADCAST, {t}, [this, t, type, root] {
      check_mpi(MPI_Bcast(t.data_ptr(), count_of(t), type, root, comm_), "MPI_Bcast");
    });
  }

  // Rank r's input lands in outputs[0][r]; the inputs may differ in size between ranks (each
  // rank passes the same output sizes).
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& /*opts*/) override {
    const at::Tensor in = single_tensor(inputs, "allgather");
    const std::vector<at::Tensor> out = rank_list(outputs, in, "allgather");
    TORCH_CHECK(out[rank_].numel() == in.numel(),
                "mpi allgather's output for this rank must have the input's size");
    const MPI_Datatype type = mpi_datatype(in.scalar_type());
    const Layout layout = layout_of(out);
    return enqueue(c10d::OpType::ALLGATHER, out, [this, in, out, type, layout] {
      const at::Tensor flat = gathered_.get(in.scalar_type(), layout.total);
      check_mpi(MPI_Allgatherv(in.data_ptr(), count_of(in), type, flat.data_ptr(),
                               layout.counts.data(), layout.displacements.data(), type, comm_),
                "MPI_Allgatherv");
      for (int r = 0; r < size_; ++r)
        out[r].copy_(flat.narrow(0, layout.displacements[r], out[r].numel()).view(out[r].sizes()));
    });
  }

  // Rank r's outputs[0] becomes the reduction of every rank's inputs[0][r]; the parts may differ
  // in size (each rank passes the same sizes), and the output may be this rank's own input part.
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const at::Tensor mine = single_tensor(outputs, "reduce_scatter");
    const std::vector<at::Tensor> parts = rank_list(inputs, mine, "reduce_scatter");
    TORCH_CHECK(parts[rank_].numel() == mine.numel(),
                "mpi reduce_scatter's output must have the size of this rank's part");
    const MPI_Datatype type = mpi_datatype(mine.scalar_type());
    const MPI_Op op = mpi_op(opts.reduceOp, mine.scalar_type());
    const Layout layout = layout_of(parts);
    return enqueue(c10d::OpType::REDUCE_SCATTER, {mine}, [this, mine, parts, type, op, layout] {
      at::Tensor send = sent_.get(mine.scalar_type(), layout.total);
      at::cat_out(send, parts, 0);
      const at::Tensor result = gathered_.get(mine.scalar_type(), mine.numel());
      check_mpi(MPI_Reduce_scatter(send.data_ptr(), result.data_ptr(), layout.counts.data(), type,
                                   op, comm_),
                "MPI_Reduce_scatter");
      mine.copy_(result);
    });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& /*opts*/) override {
    return enqueue(c10d::OpType::BARRIER, {},
                   [this] { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); });
  }

 private:
  // Element counts and displacements of one tensor per rank, laid end to end.
  struct Layout {
    std::vector<int> counts, displacements;
    int64_t total = 0;
  };

  // The one list of one CPU tensor per rank, each of `like`'s type and contiguous.
  std::vector<at::Tensor> rank_list(const std::vector<std::vector<at::Tensor>>& lists,
                                    const at::Tensor& like, const char* what) const {
    TORCH_CHECK(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size_), "mpi ", what,
                " takes one list of ", size_, " tensors");
    for (const at::Tensor& t : lists[0]) {
      single_tensor({t}, what);
      TORCH_CHECK(t.scalar_type() == like.scalar_type(), "mpi ", what,
                  " takes tensors of one type");
    }
    return lists[0];
  }

  static Layout layout_of(const std::vector<at::Tensor>& tensors) {
    Layout layout;
    for (const at::Tensor& t : tensors) {
      TORCH_CHECK(layout.total + t.numel() <= INT_MAX, "mpi moves at most ", INT_MAX,
                  " elements in one collective");
      layout.counts.push_back(count_of(t));
      layout.displacements.push_back(static_cast<int>(layout.total));
      layout.total += t.numel();
    }
    return layout;
  }

  // Every MPI call of the group runs on its progress thread, under the process's MPI lock.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<void()> run) {
    return progress_->enqueue(type, std::move(outputs), [run = std::move(run)] {
      std::lock_guard<std::mutex> mpi(mpi_mutex());
      run();
    });
  }

  MPI_Comm comm_;
  std::unique_ptr<MpiRing> ring_;  // null: MPI_Allreduce
  std::unique_ptr<CollectiveQueue> progress_;
  // Working buffers of reduce_scatter and allgather, used on the progress thread only.
  KeptBuffer sent_, gathered_;
};

// A communicator of its own (MPI_COMM_WORLD duplicated) that returns errors instead of aborting.
MPI_Comm duplicate_world(int& rank, int& size) {
  std::lock_guard<std::mutex> lock(mpi_mutex());
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return comm;
}

}  // namespace

c10::intrusive_ptr<compat::CollectiveGroup> make_mpi_subgroup(int color, int key,
                                                              MpiAllreduce allreduce) {
  init_mpi_once();
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = -1, size = -1;
  bool ring = false;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color < 0 ? MPI_UNDEFINED : color, key, &comm),
              "MPI_Comm_split");
    if (comm == MPI_COMM_NULL) return {};
    check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    ring = allreduce_by_ring(comm, size, allreduce);
  }
  log::debug("backend mpi, subgroup {} of {} ranks: allreduce by {}", color, size,
             allreduce_name(ring));
  return c10::make_intrusive<MpiProcessGroup>(comm, rank, size, ring);
}

bool mpi_compiled() {
  return true;
}

void require_mpi() {}

c10::intrusive_ptr<compat::CollectiveGroup> make_mpi_group(const RendezvousEnv& env,
                                                           MpiAllreduce allreduce) {
  require_mpi_launcher(env);
  init_mpi_once();
  int rank = -1, size = -1;
  MPI_Comm comm = duplicate_world(rank, size);
  if (rank != env.rank.value || size != env.world_size.value) {
    {
      std::lock_guard<std::mutex> lock(mpi_mutex());
      MPI_Comm_free(&comm);
    }
    throw UsageError(fmt::format(
        "MPI says this process is rank {} of {}, but the {} convention says rank {} ({}) of {} "
        "({}): start every rank with the same MPI launcher (mpirun -np N, or srun --mpi=pmix) "
        "and without rank overrides",
        rank, size, env.convention, env.rank.value, env.rank.source, env.world_size.value,
        env.world_size.source));
  }
  bool ring = false;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    ring = allreduce_by_ring(comm, size, allreduce);
  }
  log::info("backend mpi: allreduce by {} (--mpi-allreduce {})", allreduce_name(ring),
            to_string(allreduce));
  return c10::make_intrusive<MpiProcessGroup>(comm, rank, size, ring);
}

}  // namespace chexscale::distributed
