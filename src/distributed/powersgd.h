// PowerSGD gradient compression for one gradient bucket (Vogels, Karimireddy and Jaggi, 2019; the
// algorithm of PyTorch DDP's powerSGD_hook): each weight's gradient, seen as a matrix M of
// (shape[0], rest), is sent as two thin factors instead of itself. A step is three calls around
// two allreduces (sums) that the reducer issues:
//   first_payload():  E = M + residual; P = E Q (Q: the last step's, orthonormal); packs the
//                     uncompressed gradients and every P into one buffer
//   second_payload(): the summed buffer gives the averaged uncompressed gradients and the summed
//                     Ps; each P is orthogonalised; Q = E^T P packed into a second buffer
//   finish():         Q = summed Q / world; M' = P Q^T becomes the gradient; the residual is
//                     E - M' (formed when the next step reads it); Q orthogonalised for the next
//                     step (the warm start)
// Matrices whose compression rate rows*cols / ((rows+cols)*rank) is below the minimum, 1-D
// tensors (biases, BatchNorm) and gradients whose layout is not (shape[0], rest) in memory travel
// uncompressed in the first buffer. Q starts from a seeded normal draw, equal on every rank.
// The arithmetic is powersgd_arithmetic.h's: on CPU three sweeps over the gradients and the error
// feedback (powersgd_kernels.h), five passes over their memory a step. The first may run for one
// matrix at a time during backward (project_early), on the gradient autograd has just made.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "distributed/powersgd_arithmetic.h"
#include "distributed/powersgd_kernels.h"
#include "distributed/reducer_defaults.h"

namespace chexscale::distributed {

struct PowerSgdOptions {
  int rank = kDefaultPowerSgdRank;  // of each matrix's approximation (at most min(rows, cols))
  // Compress only when rows*cols > min_rate * (rows+cols)*rank.
  double min_rate = kDefaultPowerSgdMinRate;
  uint64_t seed = 0;  // of the first Q, shared by every rank
  // The sweeps for CPU gradients (powersgd_kernels.h); null: the fastest this CPU runs.
  const PowerSgdKernels* kernels = nullptr;
  // Compute with ATen tensor operations, as gradients off the CPU always are (the tests use it).
  bool tensor_operations = false;
};

// Whether a gradient of `sizes` is compressed at `options`, and at which rank (0 = not).
int64_t powersgd_matrix_rank(c10::IntArrayRef sizes, const PowerSgdOptions& options);

// Elements one step sends for a bucket of gradients of these shapes: the uncompressed ones plus
// (rows + cols) * rank per compressed matrix; and how many of the elements were compressed.
struct PowerSgdVolume {
  int64_t sent = 0;        // elements on the wire per step (both allreduces)
  int64_t compressed = 0;  // gradient elements that travel as factors
  int64_t total = 0;       // gradient elements
};
PowerSgdVolume powersgd_volume(const std::vector<std::vector<int64_t>>& shapes,
                               const PowerSgdOptions& options);

class PowerSgdBucket {
 public:
  // `slots`: the bucket's gradients, each stored in the bucket buffer; `ids`: the reducer's index
  // of each parameter (the seed of its Q and its name in a checkpoint).
  PowerSgdBucket(const std::vector<torch::Tensor>& slots, std::vector<size_t> ids,
                 const PowerSgdOptions& options);

  // Whether any gradient of the bucket is compressed (else the bucket needs no PowerSGD).
  bool compresses_any() const { return !matrices_.empty(); }

  // During backward, as soon as autograd has made gradient `slot` (the position in `slots`):
  // E = gradient + residual and P = E Q for that matrix, read from autograd's own tensor while it
  // is in cache, so the bucket buffer need not hold it (the slot gets the approximation in
  // finish()). False, with nothing done, when the slot travels uncompressed or `gradient` is not
  // laid out as the slot is: then the reducer copies it into the slot, as for plain allreduce.
  bool project_early(size_t slot, const torch::Tensor& gradient, double loss_scale);
  // Before a backward: a step cut short before first_payload() (a failed rank) leaves what
  // project_early() took in the error feedback, and the new step projects every matrix again.
  void begin_step();
  // The buffer to sum over ranks first (P of every matrix project_early() did not take, from the
  // slots). `loss_scale` multiplies the stored residuals, which are kept unscaled.
  torch::Tensor first_payload(double loss_scale);
  // After the first sum: the buffer to sum second, or an undefined tensor when the sums are not
  // finite (an overflow on some rank): the compressed gradients are then NaN on every rank, so
  // the step is skipped everywhere; Q stays as it was and the residuals restart from zero (this
  // step's matrix has replaced them, and may not be finite).
  torch::Tensor second_payload(int world_size);
  // After the second sum: the approximated gradients; the new residuals (divided by `loss_scale`)
  // are what residuals() gives. Non-finite sums: as for second_payload().
  void finish(int world_size, double loss_scale);

  // Seconds spent orthogonalising since construction.
  double orthogonalize_seconds() const { return orthogonalize_seconds_; }

  // Whether Q holds a warm start (false before the first compressed step and after reset()).
  bool started() const { return started_; }
  // The warm start: ("q.<id>", Q) per compressed matrix.
  std::vector<std::pair<std::string, torch::Tensor>> q_state() const;
  // The residuals back to back (this rank's error feedback, formed now; between steps), and such a
  // buffer (another rank's) split into ("<prefix><id>", residual) in the parameters' shapes.
  torch::Tensor residuals() const;
  int64_t residual_numel() const { return accumulated_flat_.numel(); }
  std::vector<std::pair<std::string, torch::Tensor>> split_residuals(
      const torch::Tensor& flat, const std::string& prefix) const;
  // Restores Q and the residuals from tensors named as state() names them, after `prefix`
  // ("residual.<rank>." for the residuals). False (nothing changed) when one is missing or has
  // another shape.
  bool restore(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
               const std::string& residual_prefix);
  // Forgets Q and the residuals: the next step starts afresh from the seeded Q.
  void reset();

 private:
  void initialize_q();
  // Every matrix's error feedback now holds `state`.
  void set_feedback(FeedbackState state);
  bool sums_finite(const torch::Tensor& payload);

  std::vector<PowerSgdMatrix> matrices_;
  std::vector<int64_t> matrix_of_slot_;      // index in matrices_, or -1: sent as it is
  std::vector<char> projected_;              // per matrix: project_early() took this step's
  std::vector<torch::Tensor> uncompressed_;  // gradient slots sent as they are
  torch::Tensor first_;                      // [uncompressed | P...]
  torch::Tensor second_;                     // [Q...]
  torch::Tensor accumulated_flat_;           // each matrix's error feedback (powersgd_kernels.h)
  std::vector<FeedbackState> feedback_;      // what each matrix's part of it holds
  torch::Tensor q_flat_;                     // the warm start
  torch::Tensor applied_p_flat_;             // the factors of the last approximation
  torch::Tensor applied_q_flat_;
  int64_t uncompressed_numel_ = 0;
  bool started_ = false;  // Q holds a warm start
  uint64_t seed_;
  PowerSgdArithmetic arithmetic_;
  double orthogonalize_seconds_ = 0;
};

}  // namespace chexscale::distributed
