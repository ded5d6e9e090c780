#include "explorer/dry_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "explorer/cli.hpp"
#include "explorer/pruning.hpp"

namespace prism::explorer {

namespace {

/// A pruned sweep's expected share of points skipped: the pilot of a sample (the front of its
/// points' bounds, at most `kDryPilot` evaluated) against the sample's bounds. A lower bound of
/// the sweep's share (its pilot is the front of more points). Also the pilot's time.
struct PruneEstimate {
    bool on = false;
    std::size_t sample = 0, pilot = 0;
    double share = 0, pilot_s = 0, screen_per_point_s = 0;
};

PruneEstimate estimate_pruning(const Experiment& e, const DesignSpace& space,
                               const Evaluator& evaluator, const Pruning& pruning) {
    constexpr std::uint64_t kDryScreened = 20'000;
    constexpr std::size_t kDryPilot = 256;
    PruneEstimate est;
    if (!pruning.enabled()) return est;
    est.on = true;
    const PilotProbe probe =
        probe_pilot(space, evaluator, pruning, kDryScreened, kDryPilot, e.seed, true);
    est.sample = probe.bounds.size();
    est.pilot = probe.pilot.size();
    est.screen_per_point_s = probe.screened ? probe.seconds / probe.screened : 0;
    std::vector<PointResult> rows;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto i : probe.pilot) {
        try {
            rows.push_back(
                evaluator.evaluate(space.decode(i).point, i, space.stream_index(i), nullptr));
        } catch (const std::exception&) {
        }
    }
    est.pilot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Pruning p = pruning;
    p.set_pilot(rows);
    std::size_t skipped = 0;
    for (const auto& [index, b] : probe.bounds) skipped += p.dominated(b) ? 1 : 0;
    est.share = est.sample ? static_cast<double>(skipped) / static_cast<double>(est.sample) : 0;
    return est;
}

}  // namespace

int dry_run(const Experiment& e, const DesignSpace& space, const Evaluator& evaluator,
            const Pruning& pruning, int workers) {
    const std::uint64_t n = space.size();
    constexpr std::uint64_t kExact = 2'000'000;
    const bool exact = n <= kExact;
    const std::uint64_t probes = exact ? n : 200'000;
    std::mt19937_64 rng(e.seed);
    std::map<std::string, std::uint64_t> filtered;
    std::vector<std::uint64_t> feasible_sample;
    std::uint64_t kept = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t k = 0; k < probes; ++k) {
        const std::uint64_t index = exact ? k : rng() % n;
        const auto d = space.decode(index);
        if (d.filtered) {
            ++filtered[*d.filtered];
        } else {
            // a uniform sample of the kept points (reservoir): evaluation cost varies over
            // the space, and its first points are not typical of it
            ++kept;
            if (feasible_sample.size() < 400) {
                feasible_sample.push_back(index);
            } else if (const std::uint64_t r = rng() % kept; r < 400) {
                feasible_sample[r] = index;
            }
        }
    }
    const double filter_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double fraction = probes ? static_cast<double>(kept) / probes : 0;
    const double kept_total = fraction * static_cast<double>(n);

    // Time a sample spread over the space (evaluation cost varies across it).
    std::vector<std::uint64_t> sample;
    const std::size_t step = std::max<std::size_t>(1, feasible_sample.size() / 100);
    for (std::size_t i = 0; i < feasible_sample.size(); i += step)
        sample.push_back(feasible_sample[i]);
    // Each sampled point twice: as the first of its stream index (the step-time distribution
    // computed) and again from the step cache (the cost of the points sharing it).
    std::size_t evaluated = 0;
    double miss_s = 0, hit_s = 0;
    const auto sample_start = std::chrono::steady_clock::now();
    for (auto index : sample) {
        if (evaluated > 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - sample_start).count() >
                kDryRunSampleBudgetS) {
            break;
        }
        StepCache cache;
        const DesignPoint p = space.decode(index).point;
        const std::uint64_t stream = space.stream_index(index);
        auto timed = [&] {  // seconds of one evaluation (a failing point counts its time too)
            const auto t = std::chrono::steady_clock::now();
            try {
                evaluator.evaluate(p, index, stream, &cache);
            } catch (const std::exception&) {
            }
            return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        };
        miss_s += timed();
        hit_s += timed();
        ++evaluated;
    }
    const double per_point = evaluated ? miss_s / evaluated : 0;
    const double per_hit = evaluated ? hit_s / evaluated : 0;
    // points sharing one stream index: the distribution is computed for one of them
    const double shared = static_cast<double>(space.points_per_stream());
    const double per_point_sweep = per_hit + (per_point - per_hit) / shared;
    const double filter_per_point = probes ? filter_s / probes : 0;
    const PruneEstimate prune = estimate_pruning(e, space, evaluator, pruning);
    // pruned: every point screened (the deterministic model), the share not skipped evaluated
    const double evaluated_share = prune.on ? 1.0 - prune.share : 1.0;
    const double total_s =
        (kept_total * (per_point_sweep * evaluated_share + prune.screen_per_point_s) +
         static_cast<double>(n) * filter_per_point) /
            std::max(1, workers) +
        prune.pilot_s;

    std::cout << fmt::format("experiment     {}\n", e.name);
    std::cout << fmt::format("space size     {} points ({} dimensions)\n", n,
                             space.dimension_count());
    if (exact) {
        std::cout << fmt::format("to evaluate    {} points; filtered {}\n", kept, n - kept);
    } else {
        const double se = std::sqrt(fraction * (1 - fraction) / probes) * static_cast<double>(n);
        std::cout << fmt::format(
            "to evaluate    ~{:.0f} points (+-{:.0f}, from {} random probes); filtered ~{:.0f}\n",
            kept_total, 2 * se, probes, static_cast<double>(n) - kept_total);
    }
    for (const auto& [reason, count] : filtered) {
        std::cout << fmt::format(
            "  filtered: {:<55} {}{}\n", reason, exact ? "" : "~",
            exact ? count : static_cast<std::uint64_t>(static_cast<double>(count) / probes * n));
    }
    std::cout << fmt::format(
        "evaluation     {:.3g} ms per point (sample of {}{})\n", per_point * 1e3, evaluated,
        evaluated < sample.size() ? fmt::format(" of {}: the sample stops after {:.0f} s",
                                                sample.size(), kDryRunSampleBudgetS)
                                  : std::string());
    if (shared > 1) {
        std::cout << fmt::format(
            "shared steps   {:.0f} points per step-time distribution (learning_rate, "
            "checkpoint_interval): {:.3g} ms per point in the sweep\n",
            shared, per_point_sweep * 1e3);
    }
    if (prune.on) {
        std::cout << fmt::format(
            "pruning        expected share skipped >= {:.1f}% (points whose bounds the front of "
            "a pilot dominates; pilot of {} points from a sample of {}, {:.2g} s)\n",
            100 * prune.share, prune.pilot, prune.sample, prune.pilot_s);
    } else if (e.evaluation.prune && !e.objectives.empty()) {
        std::cout << fmt::format("pruning        off: {}\n", pruning.off_reason());
    }
    std::cout << fmt::format("estimated run  {:.1f} s with {} worker{}\n", total_s, workers,
                             workers == 1 ? "" : "s");
    return kExitOk;
}

}  // namespace prism::explorer
