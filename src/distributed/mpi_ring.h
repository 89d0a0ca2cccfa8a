// The mpi backend's allreduce between nodes: a pipelined ring of MPI point-to-point messages, each
// small enough for OpenMPI's TCP transport to send eagerly, with Gloo's chunks and order of sums.
// OpenMPI's own MPI_Allreduce over TCP reaches half of a link's rate because each large message's
// rendezvous waits behind the peer's bulk data on the one socket (docs/architecture.md).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace chexscale::distributed {

// The bytes of one ring message: below OpenMPI's TCP eager limit (64 KiB with the headers).
inline constexpr size_t kRingSegmentBytes = 60 * 1024;
// Messages in flight each way (receives posted ahead, sends not yet completed).
inline constexpr int kRingWindow = 16;

// Which elements each rank holds the full sum of after Gloo's ring reduce-scatter
// (gloo/allreduce.cc, as ProcessGroupGloo runs it): the buffer is cut into chunks of
// `chunk_elements`, chunk c belonging to rank c (the last chunks may be short or empty).
struct RingChunks {
  int64_t count = 0;
  int64_t chunk_elements = 0;
  int ranks = 1;

  // Gloo's chunk size for `count` elements of `element_size` bytes on `ranks` ranks.
  static RingChunks gloo(int64_t count, size_t element_size, int ranks);
  // [begin, end) of chunk `c` (any integer, taken modulo ranks).
  int64_t begin(int c) const;
  int64_t end(int c) const;
};

// The ring over one communicator. Chunk c's sum is built as Gloo builds it, from rank c - 1
// around to rank c, each rank adding its own element to the partial sum it received
// (x_c + (x_{c+1} + (... + x_{c-1}))), so fp32 and fp16 sums equal Gloo's to the last bit.
// Not thread-safe: the MPI group calls it from its progress thread only.
class MpiRing {
 public:
  MpiRing(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  // In place: `count` elements of `type` (`element_size` bytes each) at `data`, reduced with `op`
  // (any predefined or user-defined operation). Every rank of the communicator calls it with the
  // same count, type and op. Throws c10::Error with MPI's message when an MPI call fails.
  void allreduce(void* data, int64_t count, MPI_Datatype type, size_t element_size, MPI_Op op);

 private:
  enum class Phase { kReduceScatter, kAllgather };
  struct Piece {
    int64_t offset = 0;  // elements
    int64_t count = 0;
  };
  struct Pass;  // one phase's state (mpi_ring.cpp)

  // Message t = (step, segment) of a phase: what this rank sends left, and receives from the right.
  Piece piece(const Pass& pass, int64_t t, bool send) const;
  void run(Pass& pass);
  void post_receives(Pass& pass);
  void post_sends(Pass& pass);
  void complete_some(Pass& pass);

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::vector<char> scratch_;  // kRingWindow segments received, awaiting their reduction
};

}  // namespace chexscale::distributed
