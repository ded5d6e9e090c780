#pragma once

// Persistent factors of one cluster realization: which GPUs (and slow units: nodes or GPUs) each
// TP x CP group lands on under a placement, and the resulting group factors g.
//
// Placement semantics (DesignPoint::placement):
//  * ordered: rank coordinates (tp, cp, pp, dp) are laid onto consecutive GPUs of the machine,
//    innermost dimension first, using the first N GPUs;
//  * random: the N ranks land on a uniformly random set of N of the machine's GPUs, in random
//    order;
//  * variability_aware: knowing which units are slow, healthy units are used first (a machine
//    larger than the job, ClusterSpec::total_gpus > N, leaves slow units out); slow GPUs that
//    must be used are packed into as few TP x CP groups as possible, placed on the stage with
//    the least work, one group per replica before a second stage is used.

#include <cstdint>
#include <vector>

#include "src/stochastic/detail/step_model.hpp"
#include "src/stochastic/random.hpp"

namespace prism::stochastic::detail {

struct PersistentLayout {
    PlacementKind kind = PlacementKind::ordered;
    int stages = 1, dp = 1, group_gpus = 1, unit_gpus = 1;
    std::int64_t job_gpus = 1;
    std::int64_t machine_units = 1;
    std::int64_t job_units = 1;
    /// ordered GPU index of member j of group gi = s * dp + r: gpu_of[gi * group_gpus + j]
    std::vector<std::int32_t> gpu_of;
    /// group indices in variability-aware preference order
    std::vector<std::int32_t> preference;
};

PersistentLayout make_layout(const StepModel& model, const DesignPoint& point,
                             const HardwareSpec& hw, const ClusterSpec& cluster);

/// Draws one cluster realization: g for every group (index s * dp + r). With lockstep, the
/// caller takes the max over replicas per stage.
void draw_group_factors(const StepModel& model, const PersistentLayout& layout, Stream& stream,
                        std::vector<double>& g);

}  // namespace prism::stochastic::detail
