#include "explorer/pruning.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "explorer/design_space.hpp"
#include "explorer/result_sink.hpp"
#include "src/model/bounds.hpp"

namespace prism::explorer {

namespace {

std::vector<bool> maximize_flags(const Experiment& experiment) {
    std::vector<bool> out;
    for (const auto& o : experiment.objectives) out.push_back(o.maximize);
    return out;
}

}  // namespace

Pruning::Pruning(const Experiment& experiment, const MetricSchema& schema)
    : scenarios_(experiment),
      senses_(scenarios_.augment(maximize_flags(experiment))),
      front_(senses_.empty() ? std::vector<bool>{false} : senses_) {
    for (const auto& o : experiment.objectives) {
        metric_.push_back(find_metric(schema, o.metric));
        name_.push_back(o.metric);
        maximize_.push_back(o.maximize);
    }
    enabled_ = experiment.evaluation.prune;
    if (!enabled_) {
        off_reason_ = "[evaluation] prune = false";
        return;
    }
    if (experiment.objectives.empty()) {
        enabled_ = false;
        off_reason_ = "no objectives";
        return;
    }
    std::string why;
    if (!objectives_bounded(experiment, &why)) {
        enabled_ = false;
        off_reason_ = why;
        return;
    }
    // the bounds read deterministic metrics of the schema: all there
    for (std::size_t j = 0; j < metric_.size(); ++j) {
        if (metric_[j] < 0) {
            enabled_ = false;
            off_reason_ = "objective " + name_[j] + " is not a metric of this experiment";
            return;
        }
    }
    schema_ = schema;
}

std::vector<double> Pruning::bounds(const PointResult& screened) const {
    std::vector<double> b(name_.size(), kNaN);
    if (enabled_) {
        for (std::size_t j = 0; j < name_.size(); ++j)
            b[j] = metric_bound(schema_, screened.values, name_[j]);
    }
    return scenarios_.augment(b, screened.index);
}

std::vector<double> Pruning::objectives(const PointResult& row) const {
    std::vector<double> v(metric_.size(), kNaN);
    for (std::size_t j = 0; j < metric_.size(); ++j) {
        if (metric_[j] >= 0 && static_cast<std::size_t>(metric_[j]) < row.values.size()) {
            v[j] = row.values[metric_[j]];
        }
    }
    return scenarios_.augment(v, row.index);
}

void Pruning::set_pilot(const std::vector<PointResult>& rows) {
    for (const auto& r : rows) {
        if (r.status == PointStatus::ok) front_.insert(r.index, objectives(r));
    }
}

bool Pruning::dominated(const std::vector<double>& bounds) const {
    return enabled_ && !violated() && front_.dominated(bounds.data());
}

bool Pruning::check(const PointResult& row) {
    if (!enabled_ || row.status != PointStatus::ok) return !violated();
    const auto v = objectives(row);
    const auto b = bounds(row);
    for (std::size_t j = 0; j < maximize_.size(); ++j) {  // the scenario's ids are no bounds
        if (std::isnan(v[j]) || std::isnan(b[j])) continue;
        const double tol = 1e-12 * std::abs(b[j]);
        const bool broken = maximize_[j] ? v[j] > b[j] + tol : v[j] < b[j] - tol;
        if (broken && !violated()) {
            violation_ = {row.index, fmt::format("{} = {:.17g} {} its bound {:.17g}", name_[j],
                                                 v[j], maximize_[j] ? "above" : "below", b[j])};
        }
    }
    return !violated();
}

std::vector<double> Pruning::front_values() const {
    std::vector<double> out;
    for (const auto& v : front_.values()) out.insert(out.end(), v.begin(), v.end());
    return out;
}

ParetoArchive Pruning::archive_of(const std::vector<double>& values) const {
    ParetoArchive a(senses_.empty() ? std::vector<bool>{false} : senses_);
    const std::size_t k = std::max<std::size_t>(1, senses_.size());
    for (std::size_t i = 0; i + k <= values.size(); i += k) {
        a.insert(i / k, std::vector<double>(values.begin() + static_cast<std::ptrdiff_t>(i),
                                            values.begin() + static_cast<std::ptrdiff_t>(i + k)));
    }
    return a;
}

PilotProbe probe_pilot(const DesignSpace& space, const Evaluator& evaluator, const Pruning& pruning,
                       std::uint64_t max_screened, std::size_t max_points, std::uint64_t seed,
                       bool keep_bounds) {
    PilotProbe out;
    const auto t0 = std::chrono::steady_clock::now();
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
    const std::uint64_t n = space.size();
    std::vector<std::uint64_t> candidates;
    if (n <= 2'000'000) {
        for (std::uint64_t i = 0; i < n; ++i) {
            if (!space.decode(i).filtered) candidates.push_back(i);
        }
        out.whole_space = candidates.size() <= max_screened;
    } else {
        for (std::uint64_t k = 0; k < 4 * max_screened && candidates.size() < max_screened; ++k) {
            const std::uint64_t i = rng() % n;
            if (!space.decode(i).filtered) candidates.push_back(i);
        }
        std::sort(candidates.begin(), candidates.end());
        candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    }
    if (candidates.size() > max_screened) {
        std::shuffle(candidates.begin(), candidates.end(), rng);
        candidates.resize(max_screened);
        std::sort(candidates.begin(), candidates.end());
    }
    ParetoArchive front(pruning.senses().empty() ? std::vector<bool>{false} : pruning.senses());
    for (const std::uint64_t i : candidates) {
        PointResult screened;
        try {
            screened = evaluator.screen(space.decode(i).point, i, space.stream_index(i));
        } catch (const std::exception&) {
            continue;  // the sweep reports it as a failed point
        }
        ++out.screened;
        if (screened.status != PointStatus::dominated) continue;  // infeasible
        auto b = pruning.bounds(screened);
        front.insert(i, b);
        if (keep_bounds) out.bounds.emplace_back(i, std::move(b));
    }
    out.pilot = front.indices();
    if (out.pilot.size() > max_points) out.pilot.resize(max_points);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace prism::explorer
