#include "src/stochastic/detail/persistent.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace prism::stochastic::detail {

PersistentLayout make_layout(const StepModel& model, const DesignPoint& point,
                             const HardwareSpec& hw, const ClusterSpec& cluster) {
    PersistentLayout l;
    l.kind = point.placement.kind;
    l.stages = model.stages;
    l.dp = model.dp;
    l.group_gpus = model.group_gpus;
    l.unit_gpus = model.slow_unit_gpus;
    l.job_gpus = static_cast<std::int64_t>(l.group_gpus) * l.stages * l.dp;
    const std::int64_t machine_gpus = std::max<std::int64_t>(l.job_gpus, cluster.total_gpus);
    l.machine_units = (machine_gpus + l.unit_gpus - 1) / l.unit_gpus;
    l.job_units = (l.job_gpus + l.unit_gpus - 1) / l.unit_gpus;
    if (model.persistent_deterministic) return l;

    // sizes of (tp, cp, pp, dp); the group's tp x cp members are enumerated as one dimension
    const int tp = std::max(1, point.tp);
    const int cp = std::max(1, point.cp);
    const int tpcp = tp * cp == l.group_gpus ? tp : l.group_gpus;  // profile and point agree
    const int cpn = tp * cp == l.group_gpus ? cp : 1;
    const std::array<std::int64_t, 4> size{tpcp, cpn, l.stages, l.dp};
    std::array<std::int64_t, 4> stride{};
    std::int64_t acc = 1;
    for (const ParallelDim d : point.placement.order) {
        stride[static_cast<int>(d)] = acc;
        acc *= size[static_cast<int>(d)];
    }
    l.gpu_of.resize(static_cast<size_t>(l.job_gpus));
    for (int s = 0; s < l.stages; ++s) {
        for (int r = 0; r < l.dp; ++r) {
            const std::int64_t gi = static_cast<std::int64_t>(s) * l.dp + r;
            std::int64_t j = 0;
            for (int c = 0; c < cpn; ++c) {
                for (int t = 0; t < tpcp; ++t) {
                    l.gpu_of[gi * l.group_gpus + j++] = static_cast<std::int32_t>(
                        t * stride[0] + c * stride[1] + s * stride[2] + r * stride[3]);
                }
            }
        }
    }
    // stages by increasing work, then replicas
    std::vector<int> stage_order(l.stages);
    std::iota(stage_order.begin(), stage_order.end(), 0);
    std::stable_sort(stage_order.begin(), stage_order.end(),
                     [&](int a, int b) { return model.stage_work_s[a] < model.stage_work_s[b]; });
    for (const int s : stage_order) {
        for (int r = 0; r < l.dp; ++r) l.preference.push_back(s * l.dp + r);
    }
    return l;
}

namespace {

double group_factor(const StepModel& m, int slow, int n, Stream& stream) {
    double g = 0;
    if (slow > 0) g = m.slow_factor * m.spatial.max_quantile(stream.uniform(), slow);
    if (n - slow > 0) g = std::max(g, m.spatial.max_quantile(stream.uniform(), n - slow));
    return g;
}

}  // namespace

void draw_group_factors(const StepModel& m, const PersistentLayout& l, Stream& stream,
                        std::vector<double>& g) {
    const int groups = l.stages * l.dp;
    const int n = l.group_gpus;
    g.assign(groups, 1.0);
    if (m.persistent_deterministic) return;

    // slow units of the machine
    std::vector<std::uint8_t> slow(static_cast<size_t>(l.machine_units), 0);
    std::int64_t slow_count = 0;
    if (m.slow_probability > 0 && m.slow_factor != 1.0) {
        for (auto& f : slow) {
            f = stream.uniform() < m.slow_probability;
            slow_count += f;
        }
    }
    std::vector<int> slow_members(groups, 0);
    switch (l.kind) {
        case PlacementKind::ordered:
            for (int gi = 0; gi < groups; ++gi) {
                for (int j = 0; j < n; ++j) {
                    slow_members[gi] +=
                        slow[l.gpu_of[static_cast<size_t>(gi) * n + j] / l.unit_gpus];
                }
            }
            break;
        case PlacementKind::random: {
            // a uniformly random injection of job GPUs into machine GPUs (partial Fisher-Yates)
            const std::int64_t machine_gpus = l.machine_units * l.unit_gpus;
            std::vector<std::int32_t> perm(static_cast<size_t>(machine_gpus));
            std::iota(perm.begin(), perm.end(), 0);
            for (std::int64_t i = 0; i < l.job_gpus; ++i) {
                const auto j = i + static_cast<std::int64_t>(stream.uniform() *
                                                             static_cast<double>(machine_gpus - i));
                std::swap(perm[i], perm[std::min(j, machine_gpus - 1)]);
            }
            for (int gi = 0; gi < groups; ++gi) {
                for (int j = 0; j < n; ++j) {
                    const auto gpu = l.gpu_of[static_cast<size_t>(gi) * n + j];
                    slow_members[gi] += slow[perm[gpu] / l.unit_gpus];
                }
            }
            break;
        }
        case PlacementKind::variability_aware: {
            const std::int64_t spare = l.machine_units - l.job_units;
            const std::int64_t used_slow = std::max<std::int64_t>(0, slow_count - spare);
            std::int64_t slow_gpus = used_slow * l.unit_gpus;
            for (const auto gi : l.preference) {
                if (slow_gpus <= 0) break;
                const int k = static_cast<int>(std::min<std::int64_t>(n, slow_gpus));
                slow_members[gi] = k;
                slow_gpus -= k;
            }
            break;
        }
    }
    for (int gi = 0; gi < groups; ++gi) g[gi] = group_factor(m, slow_members[gi], n, stream);
}

}  // namespace prism::stochastic::detail
