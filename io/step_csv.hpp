#pragma once

// Per-step training times of real runs as CSV: one row per step with at least the columns
// `step` (1-based), `step_time_s` and `first_step_after_eval` (0/1), the format of
// tests/data/steps (MLPerf Training MLLOG `train_step_timing`, one CSV per run).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace prism::io {

/// Which steps count: the first `warmup_steps` are dropped (CUDA-graph and NCCL warm-up), and
/// so is the first step after each evaluation (its data pipeline restarts), when asked.
struct StepSelection {
    int warmup_steps = 5;
    bool drop_first_after_eval = true;
};

struct StepRun {
    std::string path;
    std::vector<double> step_time_s;       ///< the selected steps, in order
    std::vector<std::int64_t> step_index;  ///< their `step` values
    int rows = 0;                          ///< steps in the file
    int dropped_warmup = 0;
    int dropped_after_eval = 0;
};

/// Reads a run's CSV (at most kMaxCsvFileBytes, io/work_limits.hpp; a UTF-8 byte-order mark
/// before the header is skipped) and applies `selection`. Throws ConfigError naming the file:
/// missing, a directory, too large, no header or a required column missing, a value that is not
/// a number (with its line and column), a step time that is not a finite positive number, no
/// step left after the selection.
StepRun read_step_csv(const std::filesystem::path& path, const StepSelection& selection = {});

}  // namespace prism::io
