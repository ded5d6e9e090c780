#pragma once

// Which of the model's kernel classes (DESIGN.md section 2) a profiled GPU kernel belongs to,
// from its name and, for NCCL kernels, the collective the framework called.

#include <optional>
#include <string_view>

#include "src/model/spec.hpp"

namespace prism::io::detail {

/// The class of a kernel named `name`; `collective` is the framework's collective name where
/// the trace gives it (a kernel's "Collective name" argument or the enclosing "nccl:<name>"
/// annotation; NCCL runs all-to-all as SendRecv kernels, so it takes precedence over the
/// name). nullopt for collectives the model has no class for (broadcast, reduce, barrier).
/// Rules, first match wins: NCCL -> by collective, then by kernel name; optimizers (Adam,
/// Adagrad, SGD, LAMB, multi_tensor_apply); attention (flash, fmha, attention); GEMMs and
/// convolutions (gemm but not fbgemm, cutlass, xmma, cublas, cudnn convolution kernels,
/// split-K reductions); everything else elementwise.
std::optional<KernelClass> classify_kernel(std::string_view name, std::string_view collective);

/// The class of a memory copy or set: host-to-device copies are the data loader's, others
/// elementwise (memory-bound).
KernelClass classify_memory_op(std::string_view name);

}  // namespace prism::io::detail
