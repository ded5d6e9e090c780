#include "explorer/chunk_evaluator.hpp"

#include <chrono>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "io/result_store.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {

ChunkEvaluator::ChunkEvaluator(const DesignSpace& space, const Evaluator& evaluator)
    : space_(&space), evaluator_(&evaluator) {
    if (const char* env = std::getenv("PRISM_FAULT_INJECT_INDICES")) {
        std::stringstream in(env);
        std::string item;
        while (std::getline(in, item, ',')) {
            if (!item.empty()) inject_failures_.insert(std::stoull(item));
        }
    }
    if (const char* env = std::getenv("PRISM_TEST_POINT_DELAY_MS")) delay_ms_ = std::atof(env);
}

ChunkResult ChunkEvaluator::operator()(const WorkOrder& order) const {
    ChunkResult out;
    out.chunk_id = order.chunk_id;
    out.begin = order.begin;
    out.end = order.end;
    io::FilteredCounts filtered;  // in order of first appearance
    for (std::uint64_t index = order.begin; index < order.end; ++index) {
        const auto decoded = space_->decode(index);
        if (decoded.filtered) {
            io::add_filtered(filtered, *decoded.filtered, 1);
            continue;
        }
        try {
            if (inject_failures_.count(index) != 0) {
                throw ModelError("injected failure at index " + std::to_string(index) +
                                 " (PRISM_FAULT_INJECT_INDICES)");
            }
            out.rows.push_back(
                evaluator_->evaluate(decoded.point, index, space_->stream_index(index), &cache_));
            if (delay_ms_ > 0) {
                std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
            }
        } catch (const std::exception& e) {
            PointResult failed;
            failed.index = index;
            failed.status = PointStatus::failed;
            failed.reason = e.what();
            failed.values.assign(evaluator_->schema().size(), kNaN);
            out.rows.push_back(std::move(failed));
        }
    }
    out.filtered = std::move(filtered);
    return out;
}

}  // namespace prism::explorer
