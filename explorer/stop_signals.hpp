#pragma once

// SIGTERM and SIGINT during `prism sweep`: a clean stop at any moment. The handler is
// installed before MPI starts and only records the signal; the master reads it (before the
// result file exists, the file is still created and marked interrupted, so that a job script
// finds a file that `prism status` and `--resume` accept), workers ignore both signals and
// leave stopping to the master, which collects their chunks in flight first.

#include <atomic>

namespace prism::explorer {

/// Records the first SIGTERM or SIGINT from now on (stop_signal()).
void install_stop_signals();
/// Back to the default actions (a run with nothing to keep: --dry-run); a signal recorded so
/// far is raised again.
void restore_stop_signals();
/// Ignores SIGTERM and SIGINT (workers).
void ignore_stop_signals();
/// The recorded signal number, 0 when none arrived.
const std::atomic<int>& stop_signal();

}  // namespace prism::explorer
