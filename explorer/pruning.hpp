#pragma once

// The exact Pareto front without evaluating the dominated (no MPI: the master's and the
// workers' bookkeeping, tested alone).
//
// Every objective has a bound from the deterministic model (src/model/bounds.hpp): L <= value
// for a minimized one, U >= value for a maximized one. A point whose bound vector is dominated
// by an evaluated point's objectives is dominated itself (the evaluated point is at least as
// good in every objective and strictly better in one, since the point's values are no better
// than its bounds), so it is not on the front, and without it the front of the others is the
// same (whatever it dominates, the evaluated point dominates too). Such a point is kept as a
// `dominated` row: its deterministic metrics, its stochastic ones NaN.
//
// Order of promise: first a pilot, the points whose bounds no other point's bounds dominate
// (the front of the bounds, over the whole space or a sample of a large one), evaluated in
// full; the front of their results then decides for every other point of the sweep, in index
// order. The decision depends on nothing but the pilot, which depends on nothing but the
// experiment: the file is the same whatever the number of ranks, the order results come back
// in, or the resumes, and rows are final when written. (Pruning with every point evaluated so
// far would skip more, but which points it skips would depend on the order.) On the GPT-3
// 175B / 1024-A100 space the pilot's 37 points leave exactly the points the final front does
// not dominate.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "explorer/pareto.hpp"
#include "explorer/scenarios.hpp"
#include "src/model/evaluate.hpp"
#include "src/model/metrics.hpp"
#include "src/model/spec.hpp"

namespace prism::explorer {

class Pruning {
  public:
    /// `schema`: the evaluator's. Pruning is on when the experiment asks for it
    /// ([evaluation] prune, default on) and every objective has a bound (else off, with the
    /// reason).
    Pruning(const Experiment& experiment, const MetricSchema& schema);

    bool enabled() const noexcept { return enabled_; }
    /// Why pruning is off ("" when on).
    const std::string& off_reason() const noexcept { return off_reason_; }

    /// The objectives' bounds from a screened row (Evaluator::screen, schema order); the same
    /// from a full row (its deterministic metrics are the screen's). With scenario dimensions
    /// the row's scenario id follows twice (ScenarioKey::augment): rows of different scenarios
    /// never dominate each other, so every front and every pruning decision is per scenario.
    std::vector<double> bounds(const PointResult& screened) const;
    /// The objectives' values of a full row (with the scenario id, as bounds()).
    std::vector<double> objectives(const PointResult& row) const;

    /// The pilot's evaluated rows (ok ones count): their front decides from now on.
    void set_pilot(const std::vector<PointResult>& rows);
    /// Whether the pilot's front dominates `bounds`.
    bool dominated(const std::vector<double>& bounds) const;

    /// Checks an evaluated `ok` row against its own bounds: false (and pruning off for what
    /// follows, violation() set) when a value breaks its bound beyond rounding (1e-12
    /// relative): the bound did not hold, so it cannot be trusted for points not evaluated.
    bool check(const PointResult& row);

    /// The pilot front's objective vectors, flat (width() each): what workers prune with
    /// (archive_of).
    std::vector<double> front_values() const;
    /// An archive of `values` (front_values() of some Pruning of the same experiment).
    ParetoArchive archive_of(const std::vector<double>& values) const;

    std::size_t num_objectives() const noexcept { return metric_.size(); }
    /// The objectives' Pareto senses (maximize flags).
    const std::vector<bool>& maximize() const noexcept { return maximize_; }
    /// The senses of bounds() and objectives() vectors: maximize() and the scenario's two.
    const std::vector<bool>& senses() const noexcept { return senses_; }
    std::size_t width() const noexcept { return senses_.size(); }
    /// The first bound violation seen (index, message), if any.
    const std::pair<std::uint64_t, std::string>& violation() const noexcept { return violation_; }
    bool violated() const noexcept { return !violation_.second.empty(); }

  private:
    MetricSchema schema_;
    std::vector<int> metric_;        ///< schema index per objective
    std::vector<std::string> name_;  ///< per objective
    std::vector<bool> maximize_;
    ScenarioKey scenarios_;
    std::vector<bool> senses_;  ///< maximize_ with the scenario's (ScenarioKey::augment)
    bool enabled_ = false;
    std::string off_reason_;
    ParetoArchive front_;  ///< the pilot's
    std::pair<std::uint64_t, std::string> violation_{0, ""};
};

class DesignSpace;

/// What the pilot knows before a sweep (and a dry run's estimate of the share skipped).
struct PilotProbe {
    /// The pilot: the points whose bounds no other probed point's bounds dominate (at most
    /// `max_points` of them, the smallest indices), ascending.
    std::vector<std::uint64_t> pilot;
    /// Every probed point that fits, with its objectives' bounds (when asked for).
    std::vector<std::pair<std::uint64_t, std::vector<double>>> bounds;
    std::uint64_t screened = 0;  ///< points screened (the deterministic model run)
    bool whole_space = false;    ///< every point the filters keep was screened
    double seconds = 0;          ///< wall time of the screening
};

/// Screens the space for the pilot: every point the filters keep when the space has at most
/// 2,000,000 points and at most `max_screened` of them pass, else `max_screened` drawn at
/// random (seeded: the same pilot every time, so that a resumed sweep evaluates the same).
PilotProbe probe_pilot(const DesignSpace& space, const Evaluator& evaluator, const Pruning& pruning,
                       std::uint64_t max_screened, std::size_t max_points, std::uint64_t seed,
                       bool keep_bounds);

}  // namespace prism::explorer
