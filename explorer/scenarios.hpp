#pragma once

// Scenario dimensions: [space] dimensions that describe what is uncertain (the gradient noise
// scale b_noise by default) rather than what the user picks. Points of different scenarios
// never dominate each other: a front is computed per scenario (the file's front is the union
// of the per-scenario fronts, its `scenarios` attribute naming the dimensions), and pruning
// compares a point only with points of its own scenario.
//
// Both follow from one device: every objective vector gets the point's scenario id twice, once
// minimized and once maximized, so a dominates b only if their ids are equal (a's id <= b's
// and >= b's) and a dominates b in the objectives. The archives and the pruning bounds need no
// other change.
//
// The robust pick across scenarios: for a configuration c (the decision dimensions' values)
// and a scenario s, regret(c, s) is the multiplicative epsilon indicator of c against the
// front F_s of s, min over f in F_s of max over objectives j of c_j / f_j - 1 (f_j / c_j - 1
// for a maximized objective), and 0 when c is on F_s; the robust pick is the configuration,
// evaluated ok in every scenario, whose worst regret over the scenarios is least (ties: the
// configuration of the smallest index).

#include <cstdint>
#include <string>
#include <vector>

#include "src/model/spec.hpp"

namespace prism::explorer {

class ScenarioKey {
  public:
    explicit ScenarioKey(const Experiment& experiment);

    /// Whether the experiment has scenario dimensions with more than one scenario.
    bool enabled() const noexcept { return count_ > 1; }
    /// Number of scenarios (the product of the scenario dimensions' lengths; 1 without any).
    std::uint64_t count() const noexcept { return count_; }
    /// The scenario of design-space index `index` (0 .. count()-1).
    std::uint64_t of(std::uint64_t index) const;
    /// The configuration of `index`: the index with every scenario dimension at its first value
    /// (points of one configuration in different scenarios share it).
    std::uint64_t configuration_of(std::uint64_t index) const;
    /// "b_noise=4e+06": the scenario dimensions' values of scenario `id`.
    std::string label(std::uint64_t id) const;
    /// The scenario dimensions' names, in [space] order.
    const std::vector<std::string>& dimensions() const noexcept { return names_; }

    /// `objectives` with the scenario id of `index` appended twice when enabled().
    std::vector<double> augment(const std::vector<double>& objectives, std::uint64_t index) const;
    /// `maximize` with the two scenario senses (min, max) appended when enabled().
    std::vector<bool> augment(std::vector<bool> maximize) const;

  private:
    const Experiment* experiment_;
    std::vector<std::uint64_t> radix_;    ///< every [space] dimension's length
    std::vector<std::size_t> positions_;  ///< the scenario dimensions' positions
    std::vector<std::uint64_t> place_;    ///< each position's place value in the index
    std::vector<std::string> names_;
    std::uint64_t count_ = 1;
};

/// One row of a study for the robust pick: its index, scenario and objective values.
struct ScenarioRow {
    std::uint64_t index = 0;
    std::uint64_t configuration = 0;
    std::uint64_t scenario = 0;
    std::vector<double> objectives;
};

struct RobustPick {
    bool found = false;
    std::uint64_t configuration = 0;   ///< ScenarioKey::configuration_of
    double worst_regret = 0;           ///< max over scenarios
    std::vector<double> regret;        ///< per scenario
    std::vector<std::uint64_t> index;  ///< the configuration's row per scenario
    std::string why_not;               ///< when !found
};

/// The robust pick among `rows` (ok rows of every scenario) against the per-scenario fronts.
/// Objectives must be positive (times, costs, rates); otherwise not found, with the reason.
RobustPick robust_pick(const std::vector<ScenarioRow>& rows, const std::vector<bool>& maximize,
                       std::uint64_t scenarios);

/// regret(c, s) of objective vector `c` against the front `front` (vectors of the same length).
double scenario_regret(const std::vector<double>& c, const std::vector<std::vector<double>>& front,
                       const std::vector<bool>& maximize);

}  // namespace prism::explorer
