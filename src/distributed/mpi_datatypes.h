// MPI's names for c10 element types and c10d reduce operations (the MPI backend's only type table),
// and MPI's error codes as exceptions.
// MPI has no 16-bit float: fp16 and bf16 travel as 2-byte words (MPI_UINT16_T) and are reduced by
// user-defined operations that widen each pair of elements to float, combine them and round back
// to nearest, as Gloo does for fp16. With two ranks that is one rounding per element, so the sum
// equals Gloo's bit for bit; with more, the order of the partial sums is MPI's.
#pragma once

#include <c10/core/ScalarType.h>
#include <mpi.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

namespace chexscale::distributed {

// The MPI datatype of one element of `type`; throws c10::Error for a type MPI cannot carry.
MPI_Datatype mpi_datatype(c10::ScalarType type);

// The MPI operation that reduces `type` with `op` (SUM, PRODUCT, MIN, MAX; BAND, BOR, BXOR on
// integers); throws c10::Error for the others (AVG: sum, then divide).
MPI_Op mpi_op(const c10d::ReduceOp& op, c10::ScalarType type);

// MPI returns its errors (MPI_ERRORS_RETURN): throws c10::Error "<call> failed: <MPI's message>"
// unless `code` is MPI_SUCCESS.
void check_mpi(int code, const char* call);

// Creates the fp16 and bf16 operations. Call once, after MPI_Init, with no other MPI call running.
void create_half_ops();

}  // namespace chexscale::distributed
