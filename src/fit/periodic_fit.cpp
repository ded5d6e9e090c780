#include "src/fit/periodic_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "src/fit/detail/median.hpp"

namespace prism::fit {

namespace {

using detail::median_of;

struct Hit {
    std::int64_t index = 0;
    double excess_s = 0;
};

std::int64_t index_of(const MeasuredSteps& r, std::size_t k) {
    return r.step_index.size() == r.step_time_s.size() ? r.step_index[k]
                                                       : static_cast<std::int64_t>(k + 1);
}

// The steps of a run above its median by more than threshold_sd robust sd (1.4826 MAD).
std::vector<Hit> hits_of(const MeasuredSteps& r, double threshold_sd) {
    const double median = median_of(r.step_time_s);
    std::vector<double> deviation;
    for (double t : r.step_time_s) deviation.push_back(std::fabs(t - median));
    const double threshold = std::max(threshold_sd * 1.4826 * median_of(deviation), 1e-9 * median);
    std::vector<Hit> hits;
    for (std::size_t k = 0; k < r.step_time_s.size(); ++k) {
        if (r.step_time_s[k] - median > threshold) {
            hits.push_back({index_of(r, k), r.step_time_s[k] - median});
        }
    }
    return hits;
}

}  // namespace

PeriodicFit fit_periodic(const std::vector<MeasuredSteps>& runs, double threshold_sd,
                         std::int64_t index_window) {
    PeriodicFit fit;
    fit.event_steps.assign(runs.size(), {});
    std::vector<std::vector<Hit>> hits;
    std::vector<std::vector<bool>> used;
    for (const MeasuredSteps& r : runs) {
        hits.push_back(hits_of(r, threshold_sd));
        used.emplace_back(hits.back().size(), false);
    }
    // a fixed period inside a run: the most common gap between its hits, and the hits on that
    // lattice (within one step), three or more
    for (std::size_t r = 0; r < runs.size(); ++r) {
        const std::vector<Hit>& all = hits[r];
        if (all.size() < 3) continue;
        std::vector<std::int64_t> gaps;
        for (std::size_t j = 1; j < all.size(); ++j)
            gaps.push_back(all[j].index - all[j - 1].index);
        std::int64_t period = 0;
        std::size_t votes = 0;
        for (std::int64_t g : gaps) {
            const auto n = static_cast<std::size_t>(std::count_if(
                gaps.begin(), gaps.end(), [&](std::int64_t x) { return std::llabs(x - g) <= 1; }));
            if (g >= 2 && (n > votes || (n == votes && g < period))) {
                period = g;
                votes = n;
            }
        }
        if (votes < 2) continue;
        // the phase with the most hits on the lattice
        std::vector<std::size_t> best;
        for (const Hit& ref : all) {
            std::vector<std::size_t> on;
            for (std::size_t j = 0; j < all.size(); ++j) {
                const std::int64_t off = ((all[j].index - ref.index) % period + period) % period;
                if (off <= 1 || off >= period - 1) on.push_back(j);
            }
            if (on.size() > best.size()) best = on;
        }
        if (best.size() < 3) continue;
        // a periodic event recurs at (nearly) every lattice point between its first and last
        // hit; hits scattered at random land on a +-1 lattice of a short period by chance (the
        // lattice holds 3 / period of the indices). Kept only when at least half the lattice
        // points are hit, and at least 4x as often as the run's other steps are hits (the
        // University of Florida B200 runs: 9 scattered hits of a noisy run read as every 4)
        const std::int64_t first = all[best.front()].index, last = all[best.back()].index;
        const double points = std::floor(static_cast<double>(last - first) / period + 0.5) + 1;
        const double coverage = static_cast<double>(best.size()) / points;
        const double chance =
            static_cast<double>(all.size()) /
            static_cast<double>(std::max<std::size_t>(runs[r].step_time_s.size(), 1)) *
            std::min(3.0, static_cast<double>(period));
        if (coverage < 0.5 || coverage < 4 * chance) continue;
        std::vector<double> excess;
        std::string where;
        for (std::size_t j : best) {
            used[r][j] = true;
            excess.push_back(all[j].excess_s);
            fit.event_steps[r].push_back(all[j].index);
            where += fmt::format("{}{}", where.empty() ? "" : ", ", all[j].index);
        }
        PeriodicEvent e;
        e.name = fmt::format("every_{}", period);
        e.every = period;
        e.duration_s = median_of(excess);
        const auto same = std::find_if(fit.events.begin(), fit.events.end(),
                                       [&](const PeriodicEvent& x) { return x.name == e.name; });
        if (same == fit.events.end()) {
            fit.events.push_back(e);
            fit.evidence.push_back(fmt::format("{}: steps {}", runs[r].name, where));
        } else {
            fit.evidence[static_cast<std::size_t>(same - fit.events.begin())] +=
                fmt::format("; {}: steps {}", runs[r].name, where);
        }
    }
    // the same index in every run (two runs or more)
    if (runs.size() >= 2) {
        for (std::size_t h = 0; h < hits[0].size(); ++h) {
            const std::int64_t at = hits[0][h].index;
            std::vector<std::size_t> match(runs.size());
            bool everywhere = true;
            for (std::size_t r = 0; r < runs.size() && everywhere; ++r) {
                everywhere = false;
                for (std::size_t j = 0; j < hits[r].size(); ++j) {
                    if (!used[r][j] && std::llabs(hits[r][j].index - at) <= index_window) {
                        match[r] = j;
                        everywhere = true;
                        break;
                    }
                }
            }
            if (!everywhere) continue;
            std::vector<double> excess;
            std::string where;
            double steps = 0;
            for (std::size_t r = 0; r < runs.size(); ++r) {
                used[r][match[r]] = true;
                excess.push_back(hits[r][match[r]].excess_s);
                fit.event_steps[r].push_back(hits[r][match[r]].index);
                where += fmt::format("{}{}: step {}", where.empty() ? "" : ", ", runs[r].name,
                                     hits[r][match[r]].index);
                steps += static_cast<double>(runs[r].step_time_s.size());
            }
            PeriodicEvent e;
            e.name = fmt::format("same_index_{}", at);
            e.every =
                std::max<std::int64_t>(1, std::llround(steps / static_cast<double>(runs.size())));
            e.duration_s = median_of(excess);
            fit.events.push_back(e);
            fit.evidence.push_back(where);
        }
    }
    return fit;
}

std::vector<MeasuredSteps> without_periodic(const std::vector<MeasuredSteps>& runs,
                                            const PeriodicFit& fit) {
    std::vector<MeasuredSteps> out;
    for (std::size_t r = 0; r < runs.size(); ++r) {
        MeasuredSteps kept;
        kept.name = runs[r].name;
        const auto& drop =
            r < fit.event_steps.size() ? fit.event_steps[r] : std::vector<std::int64_t>{};
        for (std::size_t k = 0; k < runs[r].step_time_s.size(); ++k) {
            const std::int64_t i = index_of(runs[r], k);
            if (std::find(drop.begin(), drop.end(), i) != drop.end()) continue;
            kept.step_time_s.push_back(runs[r].step_time_s[k]);
            kept.step_index.push_back(i);
        }
        out.push_back(std::move(kept));
    }
    return out;
}

}  // namespace prism::fit
