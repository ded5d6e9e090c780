#pragma once

// The master/worker protocol. Tags are message kinds; payloads are Boost.Serialization binary
// archives carrying design-space indices (never design points: both sides decode them).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <boost/serialization/string.hpp>
#include <boost/serialization/utility.hpp>
#include <boost/serialization/vector.hpp>

#include "src/model/metrics.hpp"

namespace prism::explorer {

enum class Tag : int {
    ready = 1,   ///< worker -> master: give me work (first message; payload "pid P on host H")
    work = 2,    ///< master -> worker: WorkOrder
    result = 3,  ///< worker -> master: ChunkResult (also asks for more work)
    stop = 4,    ///< master -> worker: no more work, leave the loop
    fatal = 5,   ///< worker -> master: a std::string describing an error outside a point
    exit = 6,    ///< master -> worker, after `stop` and after the file is closed: the job's exit
                 ///< status (decimal text), so that every rank returns the same one
    /// after the sweep (explorer/front_verification.hpp), master -> worker: a front point to
    /// verify (its position and index, raw uint64s; empty: released); worker -> master: the
    /// position and the point's figures (raw)
    verify = 7,
};

struct WorkOrder {
    WorkOrder() = default;
    WorkOrder(std::uint64_t chunk, std::uint64_t first, std::uint64_t last)
        : chunk_id(chunk), begin(first), end(last) {}

    std::uint64_t chunk_id = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    /// Exactly these indices, each evaluated in full (a pruned sweep's pilot; begin and end are
    /// then unused); empty: the range [begin, end).
    std::vector<std::uint64_t> indices;
    /// Prune (explorer/pruning.hpp): a point whose objectives' bounds `front` (evaluated
    /// points' objective vectors, flat) dominates gets its `dominated` row, not evaluated.
    bool prune = false;
    std::vector<double> front;
    /// Indices of the range the master already holds full rows for (the pilot's): no row.
    std::vector<std::uint64_t> known;

    template <class Archive>
    void serialize(Archive& ar, unsigned /*version*/) {
        ar& chunk_id& begin& end& indices& prune& front& known;
    }
};

/// Everything a worker learned about indices [begin, end).
struct ChunkResult {
    std::uint64_t chunk_id = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
    std::vector<PointResult> rows;  ///< evaluated points (ok, infeasible, failed), index order
    std::vector<std::pair<std::string, std::uint64_t>> filtered;  ///< reason -> count
    double seconds = 0;  ///< evaluation wall time on the worker

    template <class Archive>
    void serialize(Archive& ar, unsigned /*version*/) {
        ar& chunk_id& begin& end& rows& filtered& seconds;
    }
};

std::string serialize_message(const WorkOrder& m);
std::string serialize_message(const ChunkResult& m);
void deserialize_message(const std::string& bytes, WorkOrder& m);
void deserialize_message(const std::string& bytes, ChunkResult& m);

}  // namespace prism::explorer

namespace boost::serialization {

template <class Archive>
void serialize(Archive& ar, prism::PointResult& r, unsigned /*version*/) {
    ar& r.index& r.status& r.reason& r.values& r.histogram& r.histogram_lo_s& r.histogram_hi_s;
}

}  // namespace boost::serialization
