// Element types and the reduction kernels shared by every built-in backend.
#pragma once

#include <cstddef>
#include <cstdint>

#include "api.h"

namespace braze::comm {

size_t DtypeSize(braze_dtype_t dtype);
const char* DtypeName(braze_dtype_t dtype);
bool DtypeValid(int dtype);
const char* ReduceOpName(braze_reduce_op_t op);

// dst[i] = op(srcs[0][i], ..., srcs[n-1][i]) for i < count. dst may alias
// srcs[0]. AVG is reduced as SUM here; FinishAverage divides afterwards.
void ReduceInto(void* dst, const void* const* srcs, size_t nsrcs, size_t count,
                braze_dtype_t dtype, braze_reduce_op_t op);
// Divides count elements by divisor in place (the tail of an AVG reduction).
void FinishAverage(void* data, size_t count, braze_dtype_t dtype, int divisor);

}  // namespace braze::comm
