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

namespace prism::explorer {

int dry_run(const Experiment& e, const DesignSpace& space, const Evaluator& evaluator,
            int workers) {
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
            ++kept;
            if (feasible_sample.size() < 400) feasible_sample.push_back(index);
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
    const double total_s =
        (kept_total * per_point_sweep + static_cast<double>(n) * filter_per_point) /
        std::max(1, workers);

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
    std::cout << fmt::format("estimated run  {:.1f} s with {} worker{}\n", total_s, workers,
                             workers == 1 ? "" : "s");
    return kExitOk;
}

}  // namespace prism::explorer
