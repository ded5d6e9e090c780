#pragma once

// Bounded work: the limits that keep one evaluation (and so `eval`, `--dry-run` and every
// sweep point) to seconds and megabytes, with the reason for each. Limits on values of the
// experiment are checked where the experiment is read (located errors); limits that depend on
// the point are reasons to filter it before evaluation (work_limit_reason).
//
// Measured on a 2-core VM (Llama 3 8B preset, prism-paper variability, `prism eval`):
// - pipeline schedule: pp x v x microbatches = 500,000 slots took 7.1 s and 190 MB (analytic;
//   the schedule DAG and its passes grow with the slots); 5,000,000 did not finish in 30 s and
//   had taken 1.8 GB. Real schedules have at most tens of thousands (Megatron 1T: pp 64, v 2,
//   512 microbatches = 65,536).
// - GPUs: Monte Carlo draws a factor per GPU: 1,000 samples at 2^20 GPUs took 12.6 s. The
//   largest clusters trained on so far have ~10^5 GPUs.
// - Monte Carlo samples: 10^5 samples of a 64-GPU point took 5.5 s; at 10^5 samples the p99's
//   binomial standard error is 3e-4 of the probability, far below the model's own error.
// - histogram bins: a float32 per bin per point; 4096 bins resolve 1/4096 of the step-time
//   range and cost 16 KiB per point (16 GiB for a million points).

#include <cstdint>
#include <optional>
#include <string>

#include "src/model/spec.hpp"

namespace prism::io {

inline constexpr std::int64_t kMaxPipelineSlots = 262144;  ///< pp x v x microbatches
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxSamples = 100000;
/// Monte Carlo samples x GPUs x (11 with the sensitivity ranking, which evaluates the point
/// again with each of 10 kernel classes made deterministic).
inline constexpr std::int64_t kMaxMonteCarloWork = std::int64_t{1} << 30;
inline constexpr std::int64_t kMaxHistogramBins = 4096;
inline constexpr std::int64_t kMaxListedMetrics = 64;    ///< slow_deltas, deadlines: a metric each
inline constexpr std::int64_t kMaxHardwareTables = 256;  ///< stored as an 8-bit enumeration
inline constexpr std::uintmax_t kMaxExperimentFileBytes = 1 << 20;
/// Input files of the other readers (io/detail/bounded_read.hpp), each read whole into memory:
/// - a variability profile is a page of settings like an experiment (the presets are < 4 KiB);
/// - a step or loss-curve CSV holds one line per step (~30 bytes): 64 MiB is two million
///   steps, far more than a run logs (the MLPerf runs: 300), and is read in about a second;
/// - a Kineto trace's JSON text (after decompression: a gzip bomb stops here, not in memory)
///   is parsed whole by simdjson, which needs about twice the text again; the shared traces
///   are 2-5 MB, profiles of a few steps of large models hundreds of MB.
inline constexpr std::uintmax_t kMaxProfileFileBytes = 1 << 20;
inline constexpr std::uintmax_t kMaxCsvFileBytes = std::uintmax_t{64} << 20;
inline constexpr std::uintmax_t kMaxTraceBytes = std::uintmax_t{1} << 30;

/// Why evaluating `point` would exceed the work limits ("work limit: more than 262144 pipeline
/// slots (pp x v x microbatches)"), or nothing. The reasons are fixed strings: a sweep counts
/// filtered points by reason.
std::optional<std::string> work_limit_reason(const Experiment& experiment,
                                             const DesignPoint& point);

}  // namespace prism::io
