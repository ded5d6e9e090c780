#pragma once

namespace prism::explorer {

/// Exit codes of `prism`.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;        ///< a runtime failure (I/O, MPI, a point under abort)
inline constexpr int kExitBadInput = 2;     ///< bad experiment file or command line
inline constexpr int kExitInterrupted = 3;  ///< stopped by a signal or --time-limit; resumable
inline constexpr int kExitInfeasible = 4;   ///< `eval`: the point does not fit (memory, ramp)

/// Parses the command line and runs a sub-command (sweep, validate, eval, report, status,
/// fit-lr).
int run_cli(int argc, char** argv);

}  // namespace prism::explorer
