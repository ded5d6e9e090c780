#pragma once

#include "explorer/design_space.hpp"
#include "explorer/pruning.hpp"
#include "src/model/evaluate.hpp"
#include "src/model/spec.hpp"

namespace prism::explorer {

/// The evaluation sample of `--dry-run` stops after this many seconds (at least one point is
/// timed), so that a dry run of slow points stays quick.
inline constexpr double kDryRunSampleBudgetS = 10.0;

/// `prism sweep --dry-run`: the space size, what the filters keep (exactly up to 2 million
/// points, else from 200,000 random probes), and the run time estimated from a timed sample.
/// With pruning on, also the expected share of points skipped (a pilot on a sample). Prints to
/// stdout; returns the exit code.
int dry_run(const Experiment& experiment, const DesignSpace& space, const Evaluator& evaluator,
            const Pruning& pruning, int workers);

}  // namespace prism::explorer
