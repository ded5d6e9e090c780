#pragma once

// `[evaluation] verify = "montecarlo"`: after an analytic sweep completes, the Pareto front's
// points are re-evaluated by Monte Carlo (src/model/evaluate.hpp verify_point, the sweep's
// random streams) and written to the result file's /verify group (io/verify_store.hpp). The
// analytic evaluator's known weak spots (interleaved schedules, ZeRO-3 with pipeline stages;
// docs/limitations.md) are where a front is worth this check. Under MPI the master hands
// the points out one at a time to whichever worker is free (their cost differs by 10x and more)
// and waits without polling a core away; every point's figures depend only on the point, so
// the file does not depend on the rank count.

#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "explorer/design_space.hpp"
#include "explorer/mpi_context.hpp"
#include "src/model/spec.hpp"

namespace prism::explorer {

/// True once the verification must stop (a signal, --time-limit); polled between points and
/// between a point's stages.
using StopRequested = std::function<bool()>;

enum class VerifyOutcome {
    written,       ///< /verify holds every front point
    stopped,       ///< `stop` said so: nothing written, every worker released
    workers_busy,  ///< stopped, but a worker was still on its point `grace_s` later
};

/// For each front point k, the first point j <= k of `front` with the same step-time law:
/// equal design points but for the ZeRO stage, and equal step profiles (at dp 1 the ZeRO stages
/// 0-2 are one step). The verification of j then serves k (its figures, from j's random
/// streams): the stochastic evaluators read nothing of a point but its profile and the fields
/// compared. A point that does not fit is its own.
std::vector<std::size_t> same_law_as(const Experiment& experiment, const DesignSpace& space,
                                     const std::vector<std::uint64_t>& front);

/// Master (rank 0): verifies `front` (design-space indices; empty: an empty /verify) and writes
/// /verify into the closed result file at `path`. With more than one rank every worker must be
/// in verify_front_worker; they are released when it returns `written` or `stopped`. A point
/// the Monte Carlo evaluator cannot run gets a row of NaN (and a warning on `log`). Writes
/// nothing when `stop` returns true before /verify is written (the file stays without /verify:
/// `prism status` calls it resumable and --resume verifies again). Summary lines go to `log`
/// unless `quiet`. Throws IoError when the file cannot be written, MpiError.
VerifyOutcome verify_front(const Experiment& experiment, const DesignSpace& space,
                           const std::vector<std::uint64_t>& front, const std::string& path,
                           const MpiEnvironment& mpi, const StopRequested& stop, std::ostream& log,
                           bool quiet, double grace_s = 5.0);

/// Master: releases the workers waiting in verify_front_worker without verifying anything (the
/// sweep did not complete).
void release_verify_workers(const MpiEnvironment& mpi);

/// Worker: verifies the points the master hands out until it is released.
void verify_front_worker(const Experiment& experiment, const DesignSpace& space);

}  // namespace prism::explorer
