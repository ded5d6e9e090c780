#pragma once

// Commands on result files: `prism status` (what a job script asks after each run, with a
// diagnosis of damaged files) and `prism recover` (the committed rows that read back whole,
// into a new file that --resume completes).

#include <string>

namespace prism::explorer {

/// `prism status FILE`: one line; exit 0 complete, 3 resumable (running, interrupted, failed),
/// 1 damaged or not a result file (with what can be done: recover or start again).
int status_command(const std::string& path);

/// `prism recover FILE -o NEW`: writes the committed rows of FILE that read back whole into
/// NEW (status interrupted, filtered counts recounted where needed). Exit 0 when NEW was
/// written, 1 when nothing can be saved, 2 for bad arguments.
int recover_command(const std::string& path, const std::string& output, bool overwrite);

/// For a file that --resume or status could not open: "PATH: damaged: WHAT; WAY FORWARD",
/// or "" when it is not damaged in a way salvage can name.
std::string damaged_file_message(const std::string& path);

}  // namespace prism::explorer
