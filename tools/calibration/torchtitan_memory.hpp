#pragma once

// torchtitan's published peak memory per GPU (tests/data/reference/torchtitan_llama3.csv,
// memory_gib) against prism's memory of each row, an independent check of the memory model that
// is never fitted (docs/torchtitan_sac.md). torchtitan logs torch.cuda.memory_stats()'s
// "reserved_bytes.all.peak" (torchtitan@9dec370 torchtitan/metrics.py, get_peak_stats;
// train.py logs max_reserved_gib), the caching allocator's peak: what prism counts less the
// CUDA context and NCCL's buffers, which the allocator does not hold, plus the allocator's
// fragmentation, which prism does not count.

#include <string>
#include <vector>

#include "src/model/deterministic.hpp"
#include "tools/calibration/sources.hpp"

namespace prism::calibration {

struct TorchtitanMemoryRow {
    std::string label;
    std::string recompute;       ///< the row's activation checkpointing
    double measured_gib = 0;     ///< published peak reserved
    double predicted_gib = 0;    ///< prism's allocator share, selective rows as op-level SAC
    double megatron_gib = 0;     ///< selective rows with Megatron's meaning (core_attn)
    double total_gib = 0;        ///< prism's whole per-GPU memory (the allocator's share + context
                                 ///< + NCCL), as the feasibility check sees it
    double activations_gib = 0;  ///< of predicted_gib: the stored activations
    double state_gib = 0;        ///< of predicted_gib: weights, gradients, optimizer state
    double temporary_gib = 0;    ///< of predicted_gib: logits, recompute, FSDP gathers
};

/// The allocator's share of a point's memory on its most loaded stage, in GiB.
inline double allocator_gib(const Experiment& e, const DeterministicResult& r,
                            const DesignPoint& p) {
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    const MemoryReserveSpec& reserve = e.memory_reserve;
    return (r.memory.total_bytes() - reserve.cuda_context_bytes -
            reserve.nccl_bytes_per_communicator * nccl_communicators(p)) /
           kGiB;
}

/// Every torchtitan row with its published memory, with the shipped presets.
inline std::vector<TorchtitanMemoryRow> torchtitan_memory(const std::string& data_dir) {
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    std::vector<TorchtitanMemoryRow> rows;
    for (const Case& c : torchtitan_llama3(data_dir)) {
        if (c.measured_memory_gib <= 0) continue;
        const Experiment e = make_experiment(c);
        const DesignPoint& p = e.defaults;
        const DeterministicResult r = evaluate_deterministic(e, p);
        TorchtitanMemoryRow row;
        row.label = c.set + " " + c.label;
        row.recompute = c.recompute;
        row.measured_gib = c.measured_memory_gib;
        row.predicted_gib = allocator_gib(e, r, p);
        row.total_gib = r.memory.total_bytes() / kGiB;
        row.activations_gib = r.memory.activations_bytes / kGiB;
        row.state_gib =
            (r.memory.weights_bytes + r.memory.grads_bytes + r.memory.optimizer_bytes) / kGiB;
        row.temporary_gib = r.memory.temporary_bytes / kGiB;
        Experiment megatron = e;
        megatron.training.selective_recompute = TrainingSpec::SelectiveRecompute::megatron;
        row.megatron_gib = allocator_gib(megatron, evaluate_deterministic(megatron, p), p);
        rows.push_back(row);
    }
    return rows;
}

}  // namespace prism::calibration
