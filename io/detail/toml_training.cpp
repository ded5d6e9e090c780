#include "io/detail/toml_training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "io/detail/toml_reader.hpp"

namespace prism::io::detail {

namespace {

/// Megatron-Core's pipeline layout: the decoder layers of every virtual stage in model order;
/// the first and the last (embedding, loss) may hold none.
void apply_chunk_layout(const toml::table& table, const ModelSpec& model, TrainingSpec& training) {
    const toml::node* n = table.get("layers_per_chunk");
    if (n == nullptr) return;
    if (training.first_stage_layers > 0 || training.last_stage_layers > 0 ||
        training.account_for_embedding_in_pipeline_split ||
        training.account_for_loss_in_pipeline_split) {
        fail_at(*n,
                "training.layers_per_chunk: give either layers_per_chunk or the other uneven "
                "split settings, not both");
    }
    const toml::array& values = as_array(*n, "training.layers_per_chunk");
    if (values.empty()) fail_at(*n, "training.layers_per_chunk: empty list");
    const std::int64_t layers = std::max(1, model.layers);
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
        const bool end = i == 0 || i + 1 == values.size();
        training.layers_per_chunk.push_back(static_cast<int>(
            as_integer_in(*values.get(i), "training.layers_per_chunk", end ? 0 : 1, layers)));
        sum += training.layers_per_chunk.back();
    }
    if (model.layers > 0 && sum != model.layers) {
        fail_at(*n, fmt::format("training.layers_per_chunk: the virtual stages hold {} layers, "
                                "the model has layers = {}",
                                sum, model.layers));
    }
}

/// Uneven pipeline splits: Megatron's embedding / loss slots, first_stage_layers /
/// last_stage_layers (--decoder-first/last-pipeline-num-layers) or layers_per_stage.
void apply_stage_layers(const toml::table& table, const ModelSpec& model, TrainingSpec& training) {
    if (const toml::node* n = table.get("account_for_embedding_in_pipeline_split")) {
        training.account_for_embedding_in_pipeline_split =
            as_bool(*n, "training.account_for_embedding_in_pipeline_split");
    }
    if (const toml::node* n = table.get("account_for_loss_in_pipeline_split")) {
        training.account_for_loss_in_pipeline_split =
            as_bool(*n, "training.account_for_loss_in_pipeline_split");
    }
    const bool slots = training.account_for_embedding_in_pipeline_split ||
                       training.account_for_loss_in_pipeline_split;
    const std::int64_t layers = std::max(1, model.layers);
    for (const char* key : {"first_stage_layers", "last_stage_layers"}) {
        const toml::node* n = table.get(key);
        if (n == nullptr) continue;
        const std::string full = std::string("training.") + key;
        if (slots) {
            fail_at(*n, fmt::format("{}: give either first/last stage layers or the "
                                    "account_for_*_in_pipeline_split slots, not both",
                                    full));
        }
        const int value = static_cast<int>(as_integer_in(*n, full, 1, layers));
        (std::string_view(key) == "first_stage_layers" ? training.first_stage_layers
                                                       : training.last_stage_layers) = value;
    }
    apply_chunk_layout(table, model, training);
    const toml::node* n = table.get("layers_per_stage");
    if (n == nullptr) return;
    if (!training.layers_per_chunk.empty()) {
        fail_at(*n,
                "training.layers_per_stage: give either layers_per_stage or layers_per_chunk, "
                "not both");
    }
    if (training.first_stage_layers > 0 || training.last_stage_layers > 0 || slots) {
        fail_at(*n,
                "training.layers_per_stage: give either layers_per_stage or the other uneven "
                "split settings, not both");
    }
    const toml::array& values = as_array(*n, "training.layers_per_stage");
    if (values.empty()) fail_at(*n, "training.layers_per_stage: empty list");
    std::int64_t sum = 0;
    for (const toml::node& v : values) {
        training.layers_per_stage.push_back(
            static_cast<int>(as_integer_in(v, "training.layers_per_stage", 1, layers)));
        sum += training.layers_per_stage.back();
    }
    if (model.layers > 0 && sum != model.layers) {
        fail_at(*n, fmt::format("training.layers_per_stage: the stages hold {} layers, the model "
                                "has layers = {}",
                                sum, model.layers));
    }
}

}  // namespace

void apply_training_schedule_keys(const toml::table& table, const ModelSpec& model,
                                  TrainingSpec& training) {
    if (const toml::node* n = table.get("overlap_param_gather")) {
        training.overlap_param_gather = as_bool(*n, "training.overlap_param_gather");
    }
    if (const toml::node* n = table.get("tp_comm_overlap")) {
        training.tp_comm_overlap = as_bool(*n, "training.tp_comm_overlap");
    }
    if (const toml::node* n = table.get("fsdp_prefetch")) {
        training.fsdp_prefetch = as_bool(*n, "training.fsdp_prefetch");
    }
    if (const toml::node* n = table.get("fsdp_pp_unsharded")) {
        training.fsdp_pp_unsharded = as_bool(*n, "training.fsdp_pp_unsharded");
    }
    if (const toml::node* n = table.get("blocking_p2p")) {
        training.blocking_p2p = as_bool(*n, "training.blocking_p2p");
    }
    if (const toml::node* n = table.get("bf16_optimizer")) {
        training.bf16_optimizer = as_bool(*n, "training.bf16_optimizer");
    }
    if (const toml::node* n = table.get("reduce_bucket_size")) {
        training.reduce_bucket_elements = as_positive(*n, "training.reduce_bucket_size", true);
    }
    if (const toml::node* n = table.get("grad_reduce_every_microbatch")) {
        training.grad_reduce_every_microbatch =
            as_bool(*n, "training.grad_reduce_every_microbatch");
    }
    if (const toml::node* n = table.get("param_gather_every_microbatch")) {
        training.param_gather_every_microbatch =
            as_bool(*n, "training.param_gather_every_microbatch");
    }
    apply_stage_layers(table, model, training);
}

}  // namespace prism::io::detail
