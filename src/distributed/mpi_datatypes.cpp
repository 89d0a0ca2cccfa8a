// MPI datatypes and operations for c10 types, with user-defined reductions of fp16 and bf16, and
// MPI's errors as exceptions.
#include "distributed/mpi_datatypes.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string>

namespace chexscale::distributed {
namespace {

struct Min {
  float operator()(float a, float b) const { return std::min(a, b); }
};
struct Max {
  float operator()(float a, float b) const { return std::max(a, b); }
};

// MPI_User_function: inout[i] = in[i] (op) inout[i], computed in float and rounded once.
template <typename Half, typename Combine>
void combine_halves(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const Half*>(in);
  auto* b = static_cast<Half*>(inout);
  const Combine combine;
  for (int i = 0; i < *len; ++i) {
    b[i] = static_cast<Half>(combine(static_cast<float>(a[i]), static_cast<float>(b[i])));
  }
}

// The reduce operations that 16-bit floats support, in this order in the tables below.
constexpr std::array<c10d::ReduceOp::RedOpType, 4> kHalfOps = {
    c10d::ReduceOp::SUM, c10d::ReduceOp::PRODUCT, c10d::ReduceOp::MIN, c10d::ReduceOp::MAX};

template <typename Half>
constexpr std::array<MPI_User_function*, 4> kHalfFunctions = {
    &combine_halves<Half, std::plus<float>>, &combine_halves<Half, std::multiplies<float>>,
    &combine_halves<Half, Min>, &combine_halves<Half, Max>};

std::array<MPI_Op, 4> fp16_ops{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
std::array<MPI_Op, 4> bf16_ops{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "error " + std::to_string(code);
  return std::string(text, length);
}

MPI_Op half_op(c10d::ReduceOp::RedOpType op, c10::ScalarType type) {
  const auto& ops = type == c10::kHalf ? fp16_ops : bf16_ops;
  for (size_t i = 0; i < kHalfOps.size(); ++i) {
    if (kHalfOps[i] == op) {
      TORCH_CHECK(ops[i] != MPI_OP_NULL, "the MPI operations of ", type, " are not created yet");
      return ops[i];
    }
  }
  TORCH_CHECK(false, "the mpi backend reduces ", type,
              " tensors with sum, product, min or max only");
}

}  // namespace

MPI_Datatype mpi_datatype(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return MPI_FLOAT;
    case c10::kDouble:
      return MPI_DOUBLE;
    case c10::kHalf:
    case c10::kBFloat16:
      return MPI_UINT16_T;
    case c10::kByte:
      return MPI_UINT8_T;
    case c10::kChar:
      return MPI_INT8_T;
    case c10::kShort:
      return MPI_INT16_T;
    case c10::kInt:
      return MPI_INT32_T;
    case c10::kLong:
      return MPI_INT64_T;
    case c10::kBool:
      return MPI_C_BOOL;
    default:
      TORCH_CHECK(false, "the mpi backend cannot carry ", type, " tensors");
  }
}

MPI_Op mpi_op(const c10d::ReduceOp& op, c10::ScalarType type) {
  const auto kind = static_cast<c10d::ReduceOp::RedOpType>(op);
  TORCH_CHECK(type != c10::kBool, "the mpi backend cannot reduce bool tensors");
  if (type == c10::kHalf || type == c10::kBFloat16) return half_op(kind, type);
  const bool integral = c10::isIntegralType(type, /*includeBool=*/false);
  switch (kind) {
    case c10d::ReduceOp::SUM:
      return MPI_SUM;
    case c10d::ReduceOp::PRODUCT:
      return MPI_PROD;
    case c10d::ReduceOp::MIN:
      return MPI_MIN;
    case c10d::ReduceOp::MAX:
      return MPI_MAX;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(integral, "the mpi backend's bitwise reductions need integer tensors, not ",
                  type);
      return kind == c10d::ReduceOp::BAND  ? MPI_BAND
             : kind == c10d::ReduceOp::BOR ? MPI_BOR
                                           : MPI_BXOR;
    default:
      TORCH_CHECK(false, "the mpi backend has no reduce op ", static_cast<int>(kind),
                  " (AVG: sum, then divide by the world size)");
  }
}

void check_mpi(int code, const char* call) {
  TORCH_CHECK(code == MPI_SUCCESS, call, " failed: ", mpi_error_text(code));
}

void create_half_ops() {
  for (size_t i = 0; i < kHalfOps.size(); ++i) {
    const bool created =
        MPI_Op_create(kHalfFunctions<c10::Half>[i], /*commute=*/1, &fp16_ops[i]) == MPI_SUCCESS &&
        MPI_Op_create(kHalfFunctions<c10::BFloat16>[i], /*commute=*/1, &bf16_ops[i]) == MPI_SUCCESS;
    TORCH_CHECK(created, "MPI_Op_create failed for the fp16 and bf16 reductions");
  }
}

}  // namespace chexscale::distributed
