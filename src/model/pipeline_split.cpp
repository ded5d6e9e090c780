#include "src/model/pipeline_split.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "src/common/error.hpp"

namespace prism {

namespace {

/// The split before the divisibility checks; empty when the counts cannot add up.
std::vector<int> raw_split(const ModelSpec& m, const TrainingSpec& tr, int pp,
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
    const int slots_first = tr.account_for_embedding_in_pipeline_split ? 1 : 0;
    const int slots_last = tr.account_for_loss_in_pipeline_split ? 1 : 0;
    if (pp > 1 && slots_first + slots_last > 0) {
        const int slots = layers + slots_first + slots_last;
        if (slots % pp != 0) {
            *problem = "pp does not divide layers plus the embedding and loss slots";
            return {};
        }
        std::vector<int> split(pp, slots / pp);
        split.front() -= slots_first;
        split.back() -= slots_last;
        return split;
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

}  // namespace

std::optional<std::string> stage_split_problem(const ModelSpec& m, const TrainingSpec& tr, int pp,
                                               int interleave) {
    std::string problem;
    const std::vector<int> split = raw_split(m, tr, pp, &problem);
    if (split.empty()) return problem;
    const int v = std::max(1, interleave);
    for (int layers : split) {
        if (layers < 1) return "a pipeline stage has no layers";
        if (layers % v != 0) {
            return is_even_split(split) ? "pp * interleave does not divide layers"
                                        : "interleave does not divide a stage's layers";
        }
    }
    return std::nullopt;
}

std::vector<int> stage_layers(const ModelSpec& m, const TrainingSpec& tr, int pp, int interleave) {
    if (const auto problem = stage_split_problem(m, tr, pp, interleave)) {
        throw ModelError(*problem + " (layers " + std::to_string(m.layers) + ", pp " +
                         std::to_string(pp) + ", interleave " + std::to_string(interleave) + ")");
    }
    std::string unused;
    return raw_split(m, tr, pp, &unused);
}

bool is_even_split(const std::vector<int>& layers) {
    return std::adjacent_find(layers.begin(), layers.end(), std::not_equal_to<>()) == layers.end();
}

}  // namespace prism
