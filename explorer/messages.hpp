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
};

struct WorkOrder {
    std::uint64_t chunk_id = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;

    template <class Archive>
    void serialize(Archive& ar, unsigned /*version*/) {
        ar& chunk_id& begin& end;
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
