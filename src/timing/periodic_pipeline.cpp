#include "src/timing/periodic_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "src/common/error.hpp"

namespace prism::timing {

namespace {

thread_local std::int64_t t_skipped = 0;
thread_local PeriodicPipeline::Totals t_totals;

}  // namespace

PeriodicPipeline::PeriodicPipeline(const PipelineShape& shape)
    : program_(detail::compile_rounds(shape)), exec_(detail::executable(program_)) {}

std::int64_t PeriodicPipeline::last_skipped_rounds() { return t_skipped; }

PeriodicPipeline::Totals& PeriodicPipeline::totals() { return t_totals; }

void PeriodicPipeline::makespans(const Lanes& lanes, double* end_s, double* content) const {
    t_skipped = 0;
    const std::int64_t skipped_before = t_totals.skipped;
    if (lanes.lanes == 0) return;
    if (content != nullptr && lanes.weight == nullptr) {
        throw ModelError("PeriodicPipeline::makespans: content needs weights");
    }
    const auto nc = static_cast<std::size_t>(classes());
    const std::size_t total = lanes.lanes;
    const std::size_t blocks = (total + kLaneBlock - 1) / kLaneBlock;
    const std::size_t block = (total + blocks - 1) / blocks;
    thread_local std::vector<double> dur, tr, w, start, end, cont;
    for (std::size_t b0 = 0; b0 < total; b0 += block) {
        const std::size_t n = std::min(block, total - b0);
        // this block's lanes as class-major rows of their own, padded to a multiple of four or
        // eight (the kernels' vectors; padding lanes repeat the block's first lane)
        const std::size_t np = n == 1 ? 1 : n <= 4 ? 4 : (n + 7) / 8 * 8;
        dur.resize(nc * np);
        tr.resize(nc * np);
        start.resize(np);
        if (content != nullptr) w.resize(nc * np);
        for (std::size_t k = 0; k < np; ++k) {
            const std::size_t from = b0 + (k < n ? k : 0);
            start[k] = lanes.start_s[from];
            for (std::size_t c = 0; c < nc; ++c) {
                dur[c * np + k] = lanes.op_s[c * total + from];
                tr[c * np + k] = lanes.transfer_s[c * total + from];
                if (content != nullptr) w[c * np + k] = lanes.weight[c * total + from];
            }
        }
        end.resize(np);
        cont.resize(np);
        const detail::PassInputs in{np, dur.data(), tr.data(),
                                    content != nullptr ? w.data() : nullptr, start.data()};
        detail::run_pass(exec_, in, end.data(), content != nullptr ? cont.data() : nullptr,
                         t_totals);
        std::memcpy(end_s + b0, end.data(), n * sizeof(double));
        if (content != nullptr) std::memcpy(content + b0, cont.data(), n * sizeof(double));
    }
    t_skipped = t_totals.skipped - skipped_before;
}

double PeriodicPipeline::makespan(const double* op_s, double transfer_s,
                                  double stage0_start_s) const {
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> tr;
    tr.assign(nc, transfer_s);
    Lanes l;
    l.lanes = 1;
    l.op_s = op_s;
    l.transfer_s = tr.data();
    l.start_s = &stage0_start_s;
    double end = 0;
    makespans(l, &end);
    return end;
}

void PeriodicPipeline::makespan_stage_lanes(const double* op_s, const double* scaled_s,
                                            double transfer_s, double stage0_start_s,
                                            const std::int32_t* lane_first, const double* delta,
                                            double* end_s, double* slope_s) const {
    const int p = program_.shape.stages;
    const auto lanes = static_cast<std::size_t>(lane_first[p]);
    if (lanes == 0) return;
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> dur, tr, w, start;
    thread_local std::vector<int> lane_stage;
    lane_stage.assign(lanes, -1);
    for (int st = 0; st < p; ++st) {
        for (auto k = static_cast<std::size_t>(lane_first[st]);
             k < static_cast<std::size_t>(lane_first[st + 1]); ++k) {
            lane_stage[k] = st;
        }
    }
    dur.resize(nc * lanes);
    tr.assign(nc * lanes, transfer_s);
    start.assign(lanes, stage0_start_s);
    if (slope_s != nullptr) w.resize(nc * lanes);
    for (std::size_t c = 0; c < nc; ++c) {
        const int st = stage_of_class(static_cast<int>(c));
        double* dr = &dur[c * lanes];
        for (std::size_t k = 0; k < lanes; ++k) {
            const bool own = lane_stage[k] == st;
            // as FlatPipeline::makespan_stage_lanes: d + delta * scaled on the lane's stage
            dr[k] = own ? op_s[c] + delta[k] * scaled_s[c] : op_s[c];
            if (slope_s != nullptr) w[c * lanes + k] = own ? scaled_s[c] : 0.0;
        }
    }
    Lanes l;
    l.lanes = lanes;
    l.op_s = dur.data();
    l.transfer_s = tr.data();
    l.start_s = start.data();
    l.weight = slope_s != nullptr ? w.data() : nullptr;
    makespans(l, end_s, slope_s);
}

void PeriodicPipeline::makespan_affine_lanes(const double* a_s, const double* b_s, const double* r,
                                             const double* transfer_s, const double* start_s,
                                             std::size_t lanes, double* end_s) const {
    if (lanes == 0) return;
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> dur, tr;
    dur.resize(nc * lanes);
    tr.resize(nc * lanes);
    for (std::size_t c = 0; c < nc; ++c) {
        for (std::size_t k = 0; k < lanes; ++k) {
            dur[c * lanes + k] = a_s[c] + r[k] * b_s[c];
            tr[c * lanes + k] = transfer_s[k];
        }
    }
    Lanes l;
    l.lanes = lanes;
    l.op_s = dur.data();
    l.transfer_s = tr.data();
    l.start_s = start_s;
    makespans(l, end_s);
}

double PeriodicPipeline::critical_path_content(const double* op_s, const double* weight_s,
                                               double transfer_s, double stage0_start_s,
                                               double* content_s) const {
    // one lane per stage, all with the same durations (so the same path), each weighing only
    // its stage's ops
    const int p = program_.shape.stages;
    const auto lanes = static_cast<std::size_t>(p);
    const auto nc = static_cast<std::size_t>(classes());
    thread_local std::vector<double> dur, tr, w, start, end;
    dur.resize(nc * lanes);
    w.resize(nc * lanes);
    tr.assign(nc * lanes, transfer_s);
    start.assign(lanes, stage0_start_s);
    end.resize(lanes);
    for (std::size_t c = 0; c < nc; ++c) {
        const int st = stage_of_class(static_cast<int>(c));
        for (std::size_t k = 0; k < lanes; ++k) {
            dur[c * lanes + k] = op_s[c];
            w[c * lanes + k] = static_cast<int>(k) == st ? weight_s[c] : 0.0;
        }
    }
    Lanes l;
    l.lanes = lanes;
    l.op_s = dur.data();
    l.transfer_s = tr.data();
    l.start_s = start.data();
    l.weight = w.data();
    makespans(l, end.data(), content_s);
    return end[0];
}

std::shared_ptr<const PeriodicPipeline> cached_periodic_pipeline(const PipelineShape& shape) {
    thread_local std::map<std::tuple<int, int, int>, std::shared_ptr<const PeriodicPipeline>> cache;
    const auto key = std::make_tuple(shape.stages, shape.chunks, shape.microbatches);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    auto pipe = std::make_shared<const PeriodicPipeline>(shape);
    if (cache.size() >= 1024) cache.clear();
    cache.emplace(key, pipe);
    return pipe;
}

}  // namespace prism::timing
