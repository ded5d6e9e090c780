#include "explorer/scheduler.hpp"

#include <algorithm>
#include <cmath>

namespace prism::explorer {

ChunkScheduler::ChunkScheduler(std::uint64_t begin, std::uint64_t end, int workers,
                               SchedulerOptions options)
    : next_(begin), end_(std::max(begin, end)), workers_(std::max(1, workers)), options_(options) {}

std::optional<Chunk> ChunkScheduler::next() {
    if (stopped_ || next_ >= end_) return std::nullopt;
    const std::uint64_t remaining = end_ - next_;
    // Guided self-scheduling: a share of what is left, so chunks shrink towards the end and the
    // last workers finish together.
    auto size = static_cast<std::uint64_t>(
        std::ceil(static_cast<double>(remaining) / (options_.guided_factor * workers_)));
    const std::uint64_t by_time = rate_ > 0
                                      ? static_cast<std::uint64_t>(rate_ * options_.target_chunk_s)
                                      : options_.first_chunk;
    size = std::min({size, std::max<std::uint64_t>(by_time, 1), options_.max_chunk});
    size = std::clamp(size, options_.min_chunk, std::max(options_.min_chunk, remaining));
    size = std::min(size, remaining);
    Chunk c{next_id_++, next_, next_ + size};
    next_ += size;
    return c;
}

void ChunkScheduler::record(const Chunk& chunk, double seconds) {
    const double points = static_cast<double>(chunk.end - chunk.begin);
    if (points <= 0) return;
    const double rate = points / std::max(seconds, 1e-6);
    // Exponential average: adapts to point cost changing across the space.
    rate_ = rate_ > 0 ? 0.7 * rate_ + 0.3 * rate : rate;
}

}  // namespace prism::explorer
