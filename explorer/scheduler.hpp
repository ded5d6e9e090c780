#pragma once

// Work distribution for a sweep, with no MPI in it (DAKOTA separates scheduling from transport):
// guided chunk sizes (large first, small at the end) capped so that a chunk takes about
// `target_chunk_s` at the measured evaluation rate, and a reorder buffer that releases finished
// chunks in index order so that the result file is the same whatever the number of workers.

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace prism::explorer {

struct Chunk {
    std::uint64_t id = 0;
    std::uint64_t begin = 0;  ///< first design-space index
    std::uint64_t end = 0;    ///< one past the last
};

struct SchedulerOptions {
    std::uint64_t min_chunk = 1;
    std::uint64_t max_chunk = 1 << 16;
    std::uint64_t first_chunk = 32;  ///< before any rate is known
    double target_chunk_s = 0.25;    ///< wall time a chunk should take on one worker
    double guided_factor = 2.0;      ///< chunk <= remaining / (factor * workers)
};

class ChunkScheduler {
  public:
    ChunkScheduler(std::uint64_t begin, std::uint64_t end, int workers,
                   SchedulerOptions options = {});

    /// The next chunk to hand out, or nullopt when everything is assigned or stop() was called.
    std::optional<Chunk> next();

    /// Feeds back how long a chunk took (seconds of evaluation on one worker).
    void record(const Chunk& chunk, double seconds);

    /// No more chunks are handed out (signal, time limit, abort).
    void stop() noexcept { stopped_ = true; }
    bool stopped() const noexcept { return stopped_; }

    std::uint64_t remaining() const noexcept { return end_ - next_; }
    /// Estimated points per second of one worker (0 until measured).
    double rate_per_worker() const noexcept { return rate_; }

  private:
    std::uint64_t next_;
    std::uint64_t end_;
    int workers_;
    SchedulerOptions options_;
    std::uint64_t next_id_ = 0;
    double rate_ = 0;
    bool stopped_ = false;
};

/// Holds results of chunks that finished out of order until every earlier index is done.
template <class Payload>
class ReorderBuffer {
  public:
    explicit ReorderBuffer(std::uint64_t first_index) : next_(first_index) {}

    void add(std::uint64_t begin, std::uint64_t end, Payload payload) {
        pending_.emplace(begin, Entry{end, std::move(payload)});
    }

    /// The next chunk in index order if it has arrived.
    std::optional<std::pair<std::uint64_t, Payload>> pop() {
        auto it = pending_.find(next_);
        if (it == pending_.end()) return std::nullopt;
        std::pair<std::uint64_t, Payload> out{it->first, std::move(it->second.payload)};
        next_ = it->second.end;
        pending_.erase(it);
        return out;
    }

    /// Every index below this has been released.
    std::uint64_t next_index() const noexcept { return next_; }
    std::size_t pending() const noexcept { return pending_.size(); }

  private:
    struct Entry {
        std::uint64_t end;
        Payload payload;
    };
    std::uint64_t next_;
    std::map<std::uint64_t, Entry> pending_;
};

}  // namespace prism::explorer
