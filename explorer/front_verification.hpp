#pragma once

// `[evaluation] verify = "montecarlo"`: after an analytic sweep completes, the Pareto front's
// points are re-evaluated by Monte Carlo (src/model/evaluate.hpp verify_point, the sweep's
// random streams) and written to the result file's /verify group (io/verify_store.hpp). The
// analytic evaluator's known weak spots (interleaved schedules, ZeRO-3 with pipeline stages;
// README Known limitations) are where a front is worth this check. Under MPI the master hands
// the points out one at a time to whichever worker is free (their cost differs by 10x and more)
// and waits without polling a core away; every point's figures depend only on the point, so
// the file does not depend on the rank count.

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "explorer/design_space.hpp"
#include "explorer/mpi_context.hpp"
#include "src/model/spec.hpp"

namespace prism::explorer {

/// Master (rank 0): verifies `front` (design-space indices; empty: nothing to verify, the
/// workers are only released) and writes /verify into the closed result file at `path`. With
/// more than one rank every worker must be in verify_front_worker. A point the Monte Carlo
/// evaluator cannot run gets a row of NaN (and a warning on `log`). Alone, returns false,
/// writing nothing, when `stop` becomes non-zero before the last point. Summary lines go to
/// `log` unless `quiet`. Throws IoError when the file cannot be written, MpiError.
bool verify_front(const Experiment& experiment, const DesignSpace& space,
                  const std::vector<std::uint64_t>& front, const std::string& path,
                  const MpiEnvironment& mpi, const std::atomic<int>* stop, std::ostream& log,
                  bool quiet);

/// Worker: verifies the points the master hands out until it is released.
void verify_front_worker(const Experiment& experiment, const DesignSpace& space);

}  // namespace prism::explorer
