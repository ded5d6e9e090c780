#include "io/work_limits.hpp"

#include <algorithm>

namespace prism::io {

std::optional<std::string> work_limit_reason(const Experiment& experiment,
                                             const DesignPoint& point) {
    const std::int64_t gpus = point.gpus();
    if (gpus > kMaxGpus) return "work limit: more than 1048576 GPUs";
    const std::int64_t batch = point.global_batch_seqs > 0 ? point.global_batch_seqs
                                                           : experiment.training.global_batch_seqs;
    const std::int64_t per_step = std::int64_t{point.dp} * point.microbatch;
    if (per_step > 0 && batch / per_step > kMaxPipelineSlots / (std::int64_t{point.pp} *
                                                                std::max(1, point.interleave))) {
        return "work limit: more than 262144 pipeline slots (pp x v x microbatches)";
    }
    if (experiment.evaluation.method == Method::montecarlo) {
        const std::int64_t factor = experiment.evaluation.sensitivity ? 11 : 1;
        if (std::int64_t{experiment.evaluation.samples} * factor > kMaxMonteCarloWork / gpus) {
            return "work limit: Monte Carlo samples x GPUs above 2^30 (x 11 with sensitivity)";
        }
    }
    return std::nullopt;
}

}  // namespace prism::io
