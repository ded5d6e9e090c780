#include "explorer/chunk_evaluator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "io/result_store.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {

ChunkEvaluator::ChunkEvaluator(const DesignSpace& space, const Evaluator& evaluator,
                               const Pruning* pruning)
    : space_(&space), evaluator_(&evaluator), pruning_(pruning) {
    if (const char* env = std::getenv("PRISM_FAULT_INJECT_INDICES")) {
        std::stringstream in(env);
        std::string item;
        while (std::getline(in, item, ',')) {
            if (!item.empty()) inject_failures_.insert(std::stoull(item));
        }
    }
    if (const char* env = std::getenv("PRISM_TEST_POINT_DELAY_MS")) delay_ms_ = std::atof(env);
}

PointResult ChunkEvaluator::row(const DesignPoint& point, std::uint64_t index,
                                const ParetoArchive* front) const {
    const std::uint64_t stream = space_->stream_index(index);
    if (front != nullptr) {
        // the deterministic row first: a point that does not fit, or whose bounds the front
        // dominates, ends there (the same row evaluate() would give an infeasible point)
        PointResult screened = evaluator_->screen(point, index, stream);
        if (screened.status != PointStatus::dominated ||
            front->dominated(pruning_->bounds(screened).data())) {
            return screened;
        }
    }
    return evaluator_->evaluate(point, index, stream, &cache_);
}

ChunkResult ChunkEvaluator::operator()(const WorkOrder& order) const {
    ChunkResult out;
    out.chunk_id = order.chunk_id;
    out.begin = order.begin;
    out.end = order.end;
    std::optional<ParetoArchive> front;
    if (order.prune && pruning_ != nullptr && pruning_->enabled()) {
        front.emplace(pruning_->archive_of(order.front));
    }
    io::FilteredCounts filtered;  // in order of first appearance
    const bool listed = !order.indices.empty();
    const std::uint64_t count = listed ? order.indices.size() : order.end - order.begin;
    for (std::uint64_t k = 0; k < count; ++k) {
        const std::uint64_t index = listed ? order.indices[k] : order.begin + k;
        if (std::binary_search(order.known.begin(), order.known.end(), index)) continue;
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
            out.rows.push_back(row(decoded.point, index, front ? &*front : nullptr));
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
