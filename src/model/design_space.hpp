#pragma once

// The design-space dimensions a [space] table may list, decoding a tuple of value indices into a
// DesignPoint, and the cheap structural filters applied before a point is evaluated.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/model/spec.hpp"

namespace prism {

struct DimensionInfo {
    std::string name;           ///< key in [space]
    DimensionValue::Type type;  ///< the TOML type its values must have
    std::string description;    ///< with the unit, for `prism validate` and errors
};

/// Every dimension name [space] accepts.
const std::vector<DimensionInfo>& design_dimensions();

/// The registry entry for `name`, or nullptr.
const DimensionInfo* find_dimension(const std::string& name);

/// Parses a placement string: "tp-cp-pp-dp" (innermost first; any permutation of the four),
/// "random" or "aware". Throws ConfigError (without location) on anything else.
Placement parse_placement(const std::string& text);
std::string placement_name(const Placement& placement);

std::string recompute_name(Recompute r);

/// Applies value `value_index` of dimension `dim` to `point`. Throws ConfigError when the
/// value is out of range for the dimension (e.g. tp = 0, an unknown hardware name).
void apply_dimension(const Experiment& experiment, const Dimension& dim, std::size_t value_index,
                     DesignPoint& point);

/// The point with the given value index per dimension of `experiment.space`, starting from the
/// defaults. A `gpus` dimension sets dp = gpus / (tp pp cp), applied after the others.
/// `gpus_not_divisible` is set when gpus is not a multiple of tp pp cp (the point is filtered).
DesignPoint decode_point(const Experiment& experiment, const std::vector<std::size_t>& digits,
                         bool* gpus_not_divisible = nullptr);

/// Fills what follows from other dimensions when the experiment leaves it open: sequence
/// parallelism on when tp > 1 (Experiment::sequence_parallel_follows_tp). decode_point applies
/// it; so do the loader for the baseline and `eval --point`.
void resolve_point_defaults(const Experiment& experiment, DesignPoint& point);

/// Why `point` is filtered out before evaluation (structure or [constraints]), or nullopt.
/// The reason is short and stable so that it can be counted ("tp does not divide heads").
std::optional<std::string> filter_reason(const Experiment& experiment, const DesignPoint& point);

/// Why expert parallelism (ep, etp) does not fit `model` under Megatron-Core's folding: the
/// experts over etp x ep x edp on the tp x cp x dp ranks of a stage; dense models need ep =
/// etp = 1. nullopt when it fits.
std::optional<std::string> expert_parallel_problem(const ModelSpec& model,
                                                   const DesignPoint& point);

/// Human-readable "tp=8 pp=4 dp=16 ..." of the dimensions in the experiment's space.
std::string describe_point(const Experiment& experiment, const DesignPoint& point);

}  // namespace prism
