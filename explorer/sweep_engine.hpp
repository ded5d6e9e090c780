#pragma once

// The sweep loops: one process alone, or an MPI master handing chunks of design-space indices
// to workers. Results reach a ResultConsumer in index order whatever the number of workers.

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>

#include "explorer/messages.hpp"
#include "explorer/scheduler.hpp"

namespace prism::explorer {

/// Where finished chunks go (the result file, the Pareto archive, ...), in index order.
class ResultConsumer {
  public:
    virtual ~ResultConsumer() = default;
    /// Chunks arrive in increasing, contiguous index order.
    virtual void consume(ChunkResult&& chunk) = 0;
    /// Make everything consumed so far durable; every index below `next_index` is done.
    virtual void checkpoint(std::uint64_t next_index) = 0;
    /// True once a point failed under the `abort` policy: no more work is handed out.
    virtual bool abort_requested() const = 0;
};

/// Evaluates one chunk (decode, filter, evaluate each index).
using ChunkFunction = std::function<ChunkResult(const WorkOrder&)>;

struct EngineOptions {
    std::uint64_t begin = 0;  ///< first index (resume point)
    std::uint64_t end = 0;    ///< space size
    SchedulerOptions scheduler;
    double time_limit_s = 0;        ///< stop by itself after this (0 = none)
    double flush_interval_s = 2.0;  ///< checkpoint at least this often
    double grace_s = 5.0;           ///< after a stop, wait this long for chunks in flight
    const std::atomic<int>* stop_signal = nullptr;     ///< non-zero = stop (signal handler)
    std::function<void(std::uint64_t done)> progress;  ///< indices done since `begin`
    /// A worker reported for duty: its rank and "pid P on host H" (MPICH names a rank it kills
    /// by pid only).
    std::function<void(int rank, const std::string& where)> worker_ready;
    /// Adds to each work order before it goes out (a pruned sweep's current front).
    std::function<void(WorkOrder&)> prepare;
    /// Indices evaluated first, in full, one work order each (a pruned sweep's pilot,
    /// explorer/pruning.hpp): their results go to `pilot_result`, not to the consumer, and the
    /// range starts once all are back.
    std::vector<std::uint64_t> pilot;
    std::function<void(ChunkResult&&)> pilot_result;
};

enum class EngineOutcome { complete, interrupted, aborted, worker_failed };

struct EngineReport {
    EngineOutcome outcome = EngineOutcome::complete;
    std::uint64_t next_index = 0;     ///< every index below it is consumed and checkpointed
    bool workers_still_busy = false;  ///< grace expired with chunks in flight (caller aborts MPI)
    double wall_s = 0;
    double master_cpu_s = 0;  ///< CPU time the master used (busy-wait check)
    int stop_signal = 0;
    /// A worker failed outside any point ("worker rank 2: ..."); every worker has stopped.
    std::string worker_failure;
    /// The consumer threw (the result file could not be written): no more work was handed
    /// out, the chunks in flight were collected and dropped, and every worker has stopped
    /// (unless workers_still_busy). Nothing was checkpointed after it.
    std::exception_ptr consumer_error;
};

/// Everything in this process.
EngineReport run_serial(const EngineOptions& options, const ChunkFunction& evaluate,
                        ResultConsumer& consumer);

/// Rank 0 of an MPI job with `workers` >= 1 workers (ranks 1..workers).
EngineReport run_master(const EngineOptions& options, int workers, ResultConsumer& consumer);

/// Ranks >= 1: ask for work, evaluate, send results, until told to stop; then `after_work`
/// (the front's verification, explorer/front_verification.hpp), if any; then wait for the job's
/// exit status from the master (send_exit_status) and return it.
int run_worker(const ChunkFunction& evaluate, const std::function<void()>& after_work = {});

/// Rank 0, once the result file is closed: tells every worker (all have been sent `stop`) the
/// exit status of the job, which they return, so that the launcher sees the same status from
/// every rank (MPICH's mpirun keeps only some ranks' statuses after forwarding a signal).
void send_exit_status(int workers, int status);

/// CPU seconds used by this process so far.
double process_cpu_seconds();

}  // namespace prism::explorer
