#include "src/model/pipeline_split.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "src/common/error.hpp"

namespace prism {

namespace {

/// Layers of every stage before they are split over chunks; empty when they cannot add up.
std::vector<int> stage_totals(const ModelSpec& m, const TrainingSpec& tr, int pp,
                              std::string* problem) {
    const int layers = m.layers;
    if (!tr.layers_per_stage.empty()) {
        if (int(tr.layers_per_stage.size()) != pp) {
            *problem = "layers_per_stage does not have pp entries";
            return {};
        }
        const long sum =
            std::accumulate(tr.layers_per_stage.begin(), tr.layers_per_stage.end(), 0L);
        if (sum != layers) {
            *problem = "layers_per_stage does not sum to layers";
            return {};
        }
        return tr.layers_per_stage;
    }
    const bool uneven = pp > 1 && (tr.first_stage_layers > 0 || tr.last_stage_layers > 0);
    if (!uneven) {
        if (layers % pp != 0) {
            *problem = "pp * interleave does not divide layers";
            return {};
        }
        return std::vector<int>(pp, layers / pp);
    }
    // Megatron-Core: the stages whose count is not given share the remaining layers evenly
    const int first = tr.first_stage_layers, last = tr.last_stage_layers;
    const int given = (first > 0) + (last > 0);
    const int rest_stages = pp - given;
    const int rest = layers - first - last;
    if (rest < 0 || (rest_stages == 0 && rest != 0) || (rest_stages > 0 && rest < rest_stages) ||
        (rest_stages > 0 && rest % rest_stages != 0)) {
        *problem = "first/last stage layers leave a remainder the other stages cannot share";
        return {};
    }
    std::vector<int> split(pp, rest_stages > 0 ? rest / rest_stages : 0);
    if (first > 0) split.front() = first;
    if (last > 0) split.back() = last;
    return split;
}

/// The chunk split, or empty with `problem` set.
std::vector<int> split_chunks(const ModelSpec& m, const TrainingSpec& tr, int pp, int v,
                              std::string* problem) {
    if (!tr.layers_per_chunk.empty()) {
        // Megatron-Core's layout: virtual stage k (model order) is chunk k / pp of rank k % pp
        const std::vector<int>& layout = tr.layers_per_chunk;
        if (int(layout.size()) != pp * v) {
            *problem = "layers_per_chunk does not have pp * interleave entries";
            return {};
        }
        if (std::accumulate(layout.begin(), layout.end(), 0L) != m.layers) {
            *problem = "layers_per_chunk does not sum to layers";
            return {};
        }
        std::vector<int> split(layout.size());
        for (std::size_t k = 0; k < layout.size(); ++k) {
            split[(k % std::size_t(pp)) * std::size_t(v) + k / std::size_t(pp)] = layout[k];
        }
        return split;
    }
    const int embedding_slot = tr.account_for_embedding_in_pipeline_split ? 1 : 0;
    const int loss_slot = tr.account_for_loss_in_pipeline_split ? 1 : 0;
    if (pp > 1 && embedding_slot + loss_slot > 0) {
        // Megatron-Core: the slots count as layers of the first / last virtual stage
        const int slots = m.layers + embedding_slot + loss_slot;
        if (slots % (pp * v) != 0) {
            *problem = "pp * interleave does not divide layers plus the embedding and loss slots";
            return {};
        }
        std::vector<int> split(std::size_t(pp) * v, slots / (pp * v));
        split.front() -= embedding_slot;
        split.back() -= loss_slot;
        return split;
    }
    const std::vector<int> totals = stage_totals(m, tr, pp, problem);
    if (totals.empty()) return {};
    std::vector<int> split;
    for (int layers : totals) {
        if (layers % v != 0) {
            *problem = is_even_split(totals) ? "pp * interleave does not divide layers"
                                             : "interleave does not divide a stage's layers";
            return {};
        }
        split.insert(split.end(), std::size_t(v), layers / v);
    }
    return split;
}

}  // namespace

std::optional<std::string> stage_split_problem(const ModelSpec& m, const TrainingSpec& tr, int pp,
                                               int interleave) {
    std::string problem;
    const std::vector<int> split = split_chunks(m, tr, pp, std::max(1, interleave), &problem);
    if (split.empty()) return problem;
    // a layout's first and last virtual stage may hold only the embedding / the loss
    const bool ends_may_be_empty = !tr.layers_per_chunk.empty() && split.size() > 1;
    const auto inner_begin = split.begin() + (ends_may_be_empty ? 1 : 0);
    const auto inner_end = split.end() - (ends_may_be_empty ? 1 : 0);
    const int v = std::max(1, interleave);
    bool empty_stage = false;
    for (std::size_t s = 0; s < split.size(); s += std::size_t(v)) {
        empty_stage = empty_stage ||
                      std::accumulate(split.begin() + long(s), split.begin() + long(s) + v, 0) == 0;
    }
    if (empty_stage || *std::min_element(split.begin(), split.end()) < 0 ||
        (inner_begin < inner_end && *std::min_element(inner_begin, inner_end) < 1)) {
        return "a pipeline stage or model chunk has no layers";
    }
    return std::nullopt;
}

std::vector<int> chunk_layers(const ModelSpec& m, const TrainingSpec& tr, int pp, int interleave) {
    if (const auto problem = stage_split_problem(m, tr, pp, interleave)) {
        throw ModelError(*problem + " (layers " + std::to_string(m.layers) + ", pp " +
                         std::to_string(pp) + ", interleave " + std::to_string(interleave) + ")");
    }
    std::string unused;
    return split_chunks(m, tr, pp, std::max(1, interleave), &unused);
}

std::vector<int> stage_layers(const ModelSpec& m, const TrainingSpec& tr, int pp, int interleave) {
    const int v = std::max(1, interleave);
    const std::vector<int> chunks = chunk_layers(m, tr, pp, v);
    std::vector<int> stages(std::size_t(pp), 0);
    for (std::size_t i = 0; i < chunks.size(); ++i) stages[i / std::size_t(v)] += chunks[i];
    return stages;
}

bool is_even_split(const std::vector<int>& layers) {
    return std::adjacent_find(layers.begin(), layers.end(), std::not_equal_to<>()) == layers.end();
}

}  // namespace prism
