// The pipelined ring allreduce over MPI point-to-point (mpi_ring.h).
#include "distributed/mpi_ring.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "distributed/mpi_datatypes.h"

namespace chexscale::distributed {
namespace {

constexpr size_t kGlooMaxSegmentBytes = 1024 * 1024;  // gloo::AllreduceOptions::kMaxSegmentSize

size_t round_up(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

int wrap(int c, int ranks) {
  return ((c % ranks) + ranks) % ranks;
}

}  // namespace

RingChunks RingChunks::gloo(int64_t count, size_t element_size, int ranks) {
  // gloo/allreduce.cc, ring(): segments of at most 1 MiB, at least two per rank, as many on every
  // rank; a rank's chunk is its run of consecutive segments.
  const size_t total = static_cast<size_t>(count) * element_size;
  const size_t max_segment =
      element_size * std::max<size_t>(1, kGlooMaxSegmentBytes / element_size);
  const size_t n = static_cast<size_t>(ranks);
  const size_t segments = round_up(std::max((total + max_segment - 1) / max_segment, 2 * n), n);
  const size_t segment_bytes = round_up((total + segments - 1) / segments, element_size);
  RingChunks chunks;
  chunks.count = count;
  chunks.ranks = ranks;
  chunks.chunk_elements = static_cast<int64_t>(segments / n * segment_bytes / element_size);
  return chunks;
}

int64_t RingChunks::begin(int c) const {
  return std::min(count, wrap(c, ranks) * chunk_elements);
}

int64_t RingChunks::end(int c) const {
  return std::min(count, (wrap(c, ranks) + 1) * chunk_elements);
}

struct MpiRing::Pass {
  Pass(Phase phase_, char* data_, MPI_Datatype type_, size_t element_size_, MPI_Op op_,
       const RingChunks& chunks_, int64_t segment_elements_)
      : phase(phase_),
        data(data_),
        type(type_),
        element_size(element_size_),
        op(op_),
        chunks(chunks_),
        segment_elements(segment_elements_),
        segments_per_chunk((chunks_.chunk_elements + segment_elements_ - 1) / segment_elements_),
        messages((chunks_.ranks - 1) * segments_per_chunk),
        received(static_cast<size_t>(messages), 0) {}

  const Phase phase;
  char* const data;
  const MPI_Datatype type;
  const size_t element_size;
  const MPI_Op op;
  const RingChunks chunks;
  const int64_t segment_elements;
  const int64_t segments_per_chunk;
  const int64_t messages;  // (ranks - 1) steps x segments_per_chunk, each way
  // [0, kRingWindow): receives, message t in slot t % kRingWindow; then the sends, likewise.
  std::vector<MPI_Request> requests = std::vector<MPI_Request>(2 * kRingWindow, MPI_REQUEST_NULL);
  std::vector<int64_t> receiving = std::vector<int64_t>(kRingWindow, -1);
  std::vector<char> received;  // per message: arrived (and, in reduce-scatter, reduced)
  int64_t next_receive = 0, next_send = 0, first_missing = 0;
  int64_t receives_done = 0, sends_done = 0;

  bool done() const { return receives_done == messages && sends_done == messages; }
  void mark_received(int64_t t) {
    received[t] = 1;
    ++receives_done;
    while (first_missing < messages && received[first_missing])
      ++first_missing;
  }
  int tag() const { return phase == Phase::kReduceScatter ? 0 : 1; }
};

void MpiRing::allreduce(void* data, int64_t count, MPI_Datatype type, size_t element_size,
                        MPI_Op op) {
  if (size_ == 1 || count == 0) return;
  const RingChunks chunks = RingChunks::gloo(count, element_size, size_);
  const int64_t segment_elements =
      std::max<int64_t>(1, static_cast<int64_t>(kRingSegmentBytes / element_size));
  scratch_.resize(static_cast<size_t>(segment_elements) * element_size * kRingWindow);
  for (Phase phase : {Phase::kReduceScatter, Phase::kAllgather}) {
    Pass pass(phase, static_cast<char*>(data), type, element_size, op, chunks, segment_elements);
    run(pass);
  }
}

// Reduce-scatter step s: send chunk rank+1+s (this rank's own part of it at s = 0, then the
// partial sum just received), receive chunk rank+2+s; after ranks - 1 steps chunk `rank` is whole.
// Allgather step s: send chunk rank+s (this rank's whole chunk at s = 0, then the one just
// received), receive chunk rank+1+s straight into place.
MpiRing::Piece MpiRing::piece(const Pass& pass, int64_t t, bool send) const {
  const int step = static_cast<int>(t / pass.segments_per_chunk);
  const int64_t segment = t % pass.segments_per_chunk;
  const int chunk = rank_ + step + (send ? 0 : 1) + (pass.phase == Phase::kReduceScatter ? 1 : 0);
  Piece p;
  p.offset = pass.chunks.begin(chunk) + segment * pass.segment_elements;
  p.count = std::clamp<int64_t>(pass.chunks.end(chunk) - p.offset, 0, pass.segment_elements);
  return p;
}

void MpiRing::run(Pass& pass) {
  while (true) {
    post_receives(pass);
    post_sends(pass);
    if (pass.done()) return;
    complete_some(pass);
  }
}

// Up to kRingWindow receives ahead of the first message still missing.
void MpiRing::post_receives(Pass& pass) {
  const int right = (rank_ + 1) % size_;
  while (pass.next_receive < pass.messages &&
         pass.next_receive < pass.first_missing + kRingWindow) {
    const int64_t t = pass.next_receive++;
    const int slot = static_cast<int>(t % kRingWindow);
    const Piece p = piece(pass, t, /*send=*/false);
    if (p.count == 0) {  // past the end of a short chunk: nothing travels
      pass.mark_received(t);
      continue;
    }
    char* into = pass.phase == Phase::kReduceScatter
                     ? scratch_.data() + slot * pass.segment_elements * pass.element_size
                     : pass.data + p.offset * pass.element_size;
    pass.receiving[slot] = t;
    check_mpi(MPI_Irecv(into, static_cast<int>(p.count), pass.type, right, pass.tag(), comm_,
                        &pass.requests[slot]),
              "MPI_Irecv");
  }
}

// In order, each as soon as what it carries is here (step 0: this rank's own data) and its slot
// is free.
void MpiRing::post_sends(Pass& pass) {
  const int left = (rank_ + size_ - 1) % size_;
  while (pass.next_send < pass.messages) {
    const int64_t t = pass.next_send;
    MPI_Request& request = pass.requests[kRingWindow + t % kRingWindow];
    if (request != MPI_REQUEST_NULL) return;
    if (t >= pass.segments_per_chunk && !pass.received[t - pass.segments_per_chunk]) return;
    ++pass.next_send;
    const Piece p = piece(pass, t, /*send=*/true);
    if (p.count == 0) {
      ++pass.sends_done;
      continue;
    }
    check_mpi(MPI_Isend(pass.data + p.offset * pass.element_size, static_cast<int>(p.count),
                        pass.type, left, pass.tag(), comm_, &request),
              "MPI_Isend");
  }
}

// Waits for any message; a received reduce-scatter segment is reduced into place at once.
void MpiRing::complete_some(Pass& pass) {
  int completed = 0;
  int indices[2 * kRingWindow];
  check_mpi(
      MPI_Waitsome(2 * kRingWindow, pass.requests.data(), &completed, indices, MPI_STATUSES_IGNORE),
      "MPI_Waitsome");
  TORCH_CHECK(completed != MPI_UNDEFINED, "the MPI ring waited with no message in flight");
  for (int i = 0; i < completed; ++i) {
    const int slot = indices[i];
    if (slot >= kRingWindow) {
      ++pass.sends_done;
      continue;
    }
    const int64_t t = pass.receiving[slot];
    if (pass.phase == Phase::kReduceScatter) {
      const Piece p = piece(pass, t, /*send=*/false);
      check_mpi(MPI_Reduce_local(scratch_.data() + slot * pass.segment_elements * pass.element_size,
                                 pass.data + p.offset * pass.element_size,
                                 static_cast<int>(p.count), pass.type, pass.op),
                "MPI_Reduce_local");
    }
    pass.mark_received(t);
  }
}

}  // namespace chexscale::distributed
