#include "explorer/scenarios.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::explorer {

namespace {

std::string value_text(const DimensionValue& v) {
    switch (v.type) {
        case DimensionValue::Type::integer:
            return std::to_string(v.i);
        case DimensionValue::Type::number:
            return fmt::format("{:g}", v.d);
        case DimensionValue::Type::string:
            return v.s;
        case DimensionValue::Type::boolean:
            return v.b ? "true" : "false";
    }
    return "?";
}

}  // namespace

ScenarioKey::ScenarioKey(const Experiment& experiment) : experiment_(&experiment) {
    const auto& dims = experiment.space.dimensions;
    for (const auto& d : dims) radix_.push_back(d.values.size());
    for (const std::string& name : experiment.space.scenarios) {
        for (std::size_t k = 0; k < dims.size(); ++k) {
            if (dims[k].name != name) continue;
            positions_.push_back(k);
            names_.push_back(name);
            count_ *= radix_[k];
        }
    }
    place_.resize(positions_.size());
    for (std::size_t p = 0; p < positions_.size(); ++p) {
        std::uint64_t place = 1;
        for (std::size_t k = positions_[p] + 1; k < radix_.size(); ++k) place *= radix_[k];
        place_[p] = place;
    }
}

std::uint64_t ScenarioKey::of(std::uint64_t index) const {
    std::uint64_t id = 0;
    for (std::size_t p = 0; p < positions_.size(); ++p) {
        const std::uint64_t digit = (index / place_[p]) % radix_[positions_[p]];
        id = id * radix_[positions_[p]] + digit;
    }
    return id;
}

std::uint64_t ScenarioKey::configuration_of(std::uint64_t index) const {
    for (std::size_t p = 0; p < positions_.size(); ++p) {
        const std::uint64_t digit = (index / place_[p]) % radix_[positions_[p]];
        index -= digit * place_[p];
    }
    return index;
}

std::string ScenarioKey::label(std::uint64_t id) const {
    std::vector<std::string> parts(positions_.size());
    for (std::size_t p = positions_.size(); p-- > 0;) {
        const std::uint64_t r = radix_[positions_[p]];
        const auto& dim = experiment_->space.dimensions[positions_[p]];
        parts[p] = dim.name + "=" + value_text(dim.values[id % r]);
        id /= r;
    }
    std::string out;
    for (const auto& part : parts) out += (out.empty() ? "" : " ") + part;
    return out;
}

std::vector<double> ScenarioKey::augment(const std::vector<double>& objectives,
                                         std::uint64_t index) const {
    std::vector<double> out = objectives;
    if (enabled()) {
        const double id = static_cast<double>(of(index));
        out.push_back(id);
        out.push_back(id);
    }
    return out;
}

std::vector<bool> ScenarioKey::augment(std::vector<bool> maximize) const {
    if (enabled()) {
        maximize.push_back(false);
        maximize.push_back(true);
    }
    return maximize;
}

double scenario_regret(const std::vector<double>& c, const std::vector<std::vector<double>>& front,
                       const std::vector<bool>& maximize) {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& f : front) {
        double worst = 0;  // c on the front (or better) costs nothing
        for (std::size_t j = 0; j < c.size(); ++j) {
            const double r = maximize[j] ? f[j] / c[j] - 1 : c[j] / f[j] - 1;
            worst = std::max(worst, r);
        }
        best = std::min(best, worst);
    }
    return best;
}

RobustPick robust_pick(const std::vector<ScenarioRow>& rows, const std::vector<bool>& maximize,
                       std::uint64_t scenarios) {
    RobustPick pick;
    if (scenarios < 2) {
        pick.why_not = "one scenario";
        return pick;
    }
    // every row's objectives positive and finite
    for (const auto& r : rows) {
        if (r.objectives.size() != maximize.size())
            throw Error("robust_pick: a row's objectives do not match the senses");
        for (double v : r.objectives) {
            if (!(v > 0) || !std::isfinite(v)) {
                pick.why_not = "an objective is not positive (regret is relative)";
                return pick;
            }
        }
    }
    // per scenario: its rows and its front (brute force is fine: fronts are small, and the
    // rows are the ok ones)
    std::vector<std::vector<const ScenarioRow*>> by_scenario(scenarios);
    for (const auto& r : rows) {
        if (r.scenario >= scenarios) throw Error("robust_pick: scenario id out of range");
        by_scenario[r.scenario].push_back(&r);
    }
    std::vector<std::vector<std::vector<double>>> fronts(scenarios);
    for (std::uint64_t s = 0; s < scenarios; ++s) {
        const auto& members = by_scenario[s];
        for (const ScenarioRow* a : members) {
            bool dominated = false;
            for (const ScenarioRow* b : members) {
                bool no_worse = true;
                bool better = false;
                for (std::size_t j = 0; j < maximize.size(); ++j) {
                    const double x = maximize[j] ? -a->objectives[j] : a->objectives[j];
                    const double y = maximize[j] ? -b->objectives[j] : b->objectives[j];
                    if (y > x) no_worse = false;
                    if (y < x) better = true;
                }
                if (no_worse && better) {
                    dominated = true;
                    break;
                }
            }
            if (!dominated) fronts[s].push_back(a->objectives);
        }
        if (fronts[s].empty()) {
            pick.why_not = "a scenario has no ok point";
            return pick;
        }
    }
    // configurations present in every scenario
    std::map<std::uint64_t, std::vector<const ScenarioRow*>> by_config;
    for (const auto& r : rows) {
        auto& slot = by_config[r.configuration];
        if (slot.empty()) slot.assign(scenarios, nullptr);
        slot[r.scenario] = &r;
    }
    for (const auto& [config, per] : by_config) {
        if (std::find(per.begin(), per.end(), nullptr) != per.end()) continue;
        std::vector<double> regret(scenarios);
        double worst = 0;
        for (std::uint64_t s = 0; s < scenarios; ++s) {
            regret[s] = scenario_regret(per[s]->objectives, fronts[s], maximize);
            worst = std::max(worst, regret[s]);
        }
        if (!pick.found || worst < pick.worst_regret) {
            pick.found = true;
            pick.configuration = config;
            pick.worst_regret = worst;
            pick.regret = regret;
            pick.index.clear();
            for (const ScenarioRow* r : per) pick.index.push_back(r->index);
        }
    }
    if (!pick.found) pick.why_not = "no configuration is ok in every scenario";
    return pick;
}

}  // namespace prism::explorer
