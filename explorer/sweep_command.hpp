#pragma once

#include <string>

#include "explorer/mpi_context.hpp"

namespace prism::explorer {

struct SweepOptions {
    std::string experiment_path;
    std::string output_path;
    bool overwrite = false;
    bool resume = false;
    bool dry_run = false;
    double time_limit_s = 0;         ///< 0 = none
    double progress_interval_s = 5;  ///< plain progress lines when not on a terminal
    double flush_interval_s = 2;     ///< commit rows to the file at least this often
    bool quiet = false;              ///< no progress, no front at the end
};

/// `prism sweep`: alone (one rank) or as MPI master (rank 0) / worker (others).
/// Returns the process exit code (cli.hpp); prints errors to stderr on rank 0.
int sweep_command(const SweepOptions& options, MpiEnvironment& mpi);

/// Parses "90", "90s", "15m", "3h50m", "1h", "2d" into seconds; throws ConfigError.
double parse_duration_s(const std::string& text);

}  // namespace prism::explorer
