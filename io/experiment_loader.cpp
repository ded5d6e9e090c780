#include "io/experiment_loader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "io/detail/experiment_checks.hpp"
#include "io/detail/point_text.hpp"
#include "io/detail/toml_cotune.hpp"
#include "io/detail/toml_evaluation.hpp"
#include "io/detail/toml_reader.hpp"
#include "io/detail/toml_training.hpp"
#include "io/detail/toml_variability.hpp"
#include "io/presets.hpp"
#include "io/units.hpp"
#include "io/variability_profile.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"
#include "src/model/design_space.hpp"
#include "src/model/evaluate.hpp"
#include "src/model/memory.hpp"

namespace prism::io {

namespace {

using detail::as_array;
using detail::as_bool;
using detail::as_choice;
using detail::as_integer;
using detail::as_integer_in;
using detail::as_number;
using detail::as_positive;
using detail::as_quantity;
using detail::as_string;
using detail::as_table;
using detail::check_keys;
using detail::did_you_mean;
using detail::error_at;
using detail::fail_at;
using detail::format_number;
using detail::in_file_order;
using detail::join_key;
using detail::parse_toml;

const std::vector<std::string> kTopLevelKeys{
    "experiment",  "model",    "training",    "hardware",   "cluster",
    "defaults",    "space",    "constraints", "objectives", "evaluation",
    "variability", "failures", "cotune",      "memory",     "stack"};

std::string preset_path(std::string_view kind, std::string_view name) {
    return fmt::format("configs/presets/{}/{}.toml", kind, name);
}

/// The parsed preset `kind`/`name` named by `node` (the value of a `preset` key).
toml::table load_preset(std::string_view kind, std::string_view singular, const toml::node& node,
                        const std::string& key) {
    const std::string& name = as_string(node, key);
    const std::optional<std::string_view> text = preset_text(kind, name);
    if (!text) {
        const std::vector<std::string> names = preset_names(kind);
        std::string list;
        for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
        if (list.empty()) list = "none";
        fail_at(node, fmt::format("{}: unknown {} preset '{}' (known: {}){}", key, singular, name,
                                  list, did_you_mean(name, names)));
    }
    return parse_toml(*text, preset_path(kind, name));
}

[[noreturn]] void fail_file(const std::string& file, const std::string& message) {
    throw ConfigError(file, 0, 0, message);
}

int as_int(const toml::node& node, std::string_view key, std::int64_t min) {
    return static_cast<int>(as_integer_in(node, key, min));
}

// ---- [experiment] ----------------------------------------------------------------------------

void parse_experiment_table(const toml::table& table, Experiment& experiment) {
    check_keys(table, "experiment", {"name", "seed", "on_error", "baseline"});
    if (const toml::node* node = table.get("name")) {
        experiment.name = as_string(*node, "experiment.name");
    }
    if (const toml::node* node = table.get("seed")) {
        experiment.seed =
            static_cast<std::uint64_t>(as_integer_in(*node, "experiment.seed", 0, INT64_MAX));
    }
    if (const toml::node* node = table.get("on_error")) {
        experiment.on_error = as_choice(*node, "experiment.on_error", {"skip", "abort"}) == "skip"
                                  ? Experiment::OnError::skip
                                  : Experiment::OnError::abort;
    }
}

// ---- [model] ---------------------------------------------------------------------------------

const std::vector<std::string> kModelFields{"layers",
                                            "hidden",
                                            "heads",
                                            "kv_heads",
                                            "ffn",
                                            "gated_mlp",
                                            "vocab",
                                            "seq",
                                            "tied_embeddings",
                                            "head_dim",
                                            "experts",
                                            "top_k",
                                            "shared_experts",
                                            "expert_ffn",
                                            "dense_layers",
                                            "moe_every",
                                            "attention",
                                            "q_lora_rank",
                                            "kv_lora_rank",
                                            "qk_nope_head_dim",
                                            "qk_rope_head_dim",
                                            "v_head_dim"};

/// Integer [model] keys that may be 0 (everything else must be >= 1).
bool may_be_zero(const std::string& name) {
    return name == "shared_experts" || name == "dense_layers" || name == "q_lora_rank";
}

struct ModelDraft {
    std::map<std::string, std::int64_t> ints;
    std::optional<std::string> attention;
    std::optional<bool> gated_mlp;
    std::optional<bool> tied_embeddings;
    std::vector<std::string> overridden;
};

void apply_model_fields(const toml::table& table, bool is_preset, ModelDraft& draft,
                        ModelSpec& model) {
    std::vector<std::string> allowed = kModelFields;
    allowed.emplace_back(is_preset ? "source" : "preset");
    check_keys(table, "model", allowed);
    for (const auto& [key, node] : in_file_order(table)) {
        const std::string name(key->str());
        const std::string full = join_key("model", name);
        if (name == "preset") continue;
        if (!is_preset) draft.overridden.push_back(name);
        if (name == "source") {
            model.source = as_string(*node, full);
        } else if (name == "gated_mlp") {
            draft.gated_mlp = as_bool(*node, full);
        } else if (name == "tied_embeddings") {
            draft.tied_embeddings = as_bool(*node, full);
        } else if (name == "attention") {
            draft.attention = as_choice(*node, full, {"standard", "mla"});
        } else {
            draft.ints[name] = as_integer_in(*node, full, may_be_zero(name) ? 0 : 1);
        }
    }
}

/// The MoE and MLA keys of [model] (docs/moe.md), checked for consistency.
void parse_moe_and_mla(const toml::table& table, ModelDraft& draft, ModelSpec& model) {
    const auto where = [&](const char* key) -> const toml::source_region& {
        const toml::node* n = table.get(key);
        return n != nullptr ? n->source() : table.source();
    };
    auto get = [&](const char* key, std::int64_t fallback) {
        return static_cast<int>(draft.ints.contains(key) ? draft.ints[key] : fallback);
    };
    model.head_dim_override = get("head_dim", 0);
    model.experts = get("experts", 0);
    model.top_k = get("top_k", 0);
    model.shared_experts = get("shared_experts", 0);
    model.expert_ffn = get("expert_ffn", 0);
    model.dense_layers = get("dense_layers", 0);
    model.moe_every = get("moe_every", 1);
    if (model.experts == 0) {
        for (const char* key :
             {"top_k", "shared_experts", "expert_ffn", "dense_layers", "moe_every"}) {
            if (draft.ints.contains(key)) {
                throw error_at(where(key),
                               fmt::format("model.{}: needs an MoE model (give experts)", key));
            }
        }
    } else {
        if (model.top_k == 0 || model.top_k > model.experts) {
            throw error_at(where("top_k"),
                           fmt::format("model.top_k: give 1 to experts = {} routed experts per "
                                       "token",
                                       model.experts));
        }
        if (model.expert_ffn == 0) {
            throw error_at(where("expert_ffn"), "model: missing 'expert_ffn' (an MoE model)");
        }
        if (model.dense_layers >= model.layers) {
            throw error_at(where("dense_layers"),
                           fmt::format("model.dense_layers: {} leaves no MoE layer of layers = {}",
                                       model.dense_layers, model.layers));
        }
        if (model.moe_every > model.layers - model.dense_layers) {
            throw error_at(where("moe_every"),
                           fmt::format("model.moe_every: {} leaves no MoE layer", model.moe_every));
        }
    }
    const char* mla_keys[] = {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                              "v_head_dim"};
    if (draft.attention.value_or("standard") == "mla") {
        model.attention = AttentionKind::mla;
        for (const char* key : mla_keys) {
            if (!draft.ints.contains(key) && std::string_view(key) != "q_lora_rank") {
                throw error_at(where("attention"),
                               fmt::format("model: missing '{}' (attention = \"mla\")", key));
            }
        }
        model.q_lora_rank = get("q_lora_rank", 0);
        model.kv_lora_rank = get("kv_lora_rank", 0);
        model.qk_nope_head_dim = get("qk_nope_head_dim", 0);
        model.qk_rope_head_dim = get("qk_rope_head_dim", 0);
        model.v_head_dim = get("v_head_dim", 0);
        model.kv_heads = model.heads;  // MLA: every head has its own K and V
    } else {
        model.attention = AttentionKind::standard;
        for (const char* key : mla_keys) {
            if (draft.ints.contains(key)) {
                throw error_at(where(key), fmt::format("model.{}: needs attention = \"mla\"", key));
            }
        }
    }
}

void parse_model(const toml::table& root, const std::string& file, Experiment& experiment) {
    const toml::node* node = root.get("model");
    if (node == nullptr) fail_file(file, "missing [model] table");
    const toml::table& table = as_table(*node, "model");
    ModelSpec& model = experiment.model;
    ModelDraft draft;
    model.name = "custom";
    if (const toml::node* preset = table.get("preset")) {
        const toml::table preset_table = load_preset("models", "model", *preset, "model.preset");
        model.name = as_string(*preset, "model.preset");
        apply_model_fields(preset_table, true, draft, model);
    }
    apply_model_fields(table, false, draft, model);
    if (model.name != "custom" && !draft.overridden.empty()) {
        std::string list;
        for (const std::string& k : draft.overridden) list += (list.empty() ? "" : ", ") + k;
        model.source += fmt::format(" (overridden in the experiment: {})", list);
    }

    for (const char* required : {"layers", "hidden", "heads", "vocab", "seq"}) {
        if (!draft.ints.contains(required)) {
            throw error_at(table.source(),
                           fmt::format("model: missing '{}' (give it or a preset)", required));
        }
    }
    model.layers = static_cast<int>(draft.ints["layers"]);
    model.hidden = static_cast<int>(draft.ints["hidden"]);
    model.heads = static_cast<int>(draft.ints["heads"]);
    model.kv_heads =
        static_cast<int>(draft.ints.contains("kv_heads") ? draft.ints["kv_heads"] : model.heads);
    model.ffn = static_cast<int>(draft.ints.contains("ffn") ? draft.ints["ffn"]
                                                            : 4 * std::int64_t{model.hidden});
    model.gated_mlp = draft.gated_mlp.value_or(false);
    model.tied_embeddings = draft.tied_embeddings.value_or(true);
    model.vocab = static_cast<int>(draft.ints["vocab"]);
    model.seq = static_cast<int>(draft.ints["seq"]);

    const auto where = [&](const char* key) -> const toml::source_region& {
        const toml::node* n = table.get(key);
        return n != nullptr ? n->source() : table.source();
    };
    parse_moe_and_mla(table, draft, model);
    if (model.hidden % model.heads != 0 && !model.is_mla() && model.head_dim_override == 0) {
        throw error_at(where("heads"), fmt::format("model.heads: {} does not divide hidden = {}",
                                                   model.heads, model.hidden));
    }
    if (model.kv_heads > model.heads || model.heads % model.kv_heads != 0) {
        throw error_at(where("kv_heads"),
                       fmt::format("model.kv_heads: {} does not divide heads = {}", model.kv_heads,
                                   model.heads));
    }
}

// ---- [training] ------------------------------------------------------------------------------

/// The values of selective_recompute (stack presets, [stack], [training]).
const std::vector<std::string> kSelectiveRecomputeNames{"megatron", "torchtitan-op"};

/// TrainingSpec::fsdp_ends from its name.
TrainingSpec::FsdpEnds fsdp_ends_of(const toml::node& node, const std::string& key) {
    const std::string v = as_choice(node, key, {"units", "root", "kept"});
    return v == "root"   ? TrainingSpec::FsdpEnds::root
           : v == "kept" ? TrainingSpec::FsdpEnds::kept
                         : TrainingSpec::FsdpEnds::units;
}

/// [training] recompute_modules: Megatron-Core's names (transformer_config.py, its allowed set);
/// each must name a part the model has (as Megatron checks mla_up_proj against MLA).
void parse_recompute_modules(const toml::node& node, const ModelSpec& model,
                             TrainingSpec::RecomputeModules& out) {
    const std::string key = "training.recompute_modules";
    const toml::array& values = as_array(node, key);
    out = TrainingSpec::RecomputeModules{};
    out.core_attn = false;  // an explicit list replaces Megatron's default ["core_attn"]
    std::vector<std::string> seen;
    for (const toml::node& v : values) {
        const std::string name = as_string(v, key);
        if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
            fail_at(v, fmt::format("{}: \"{}\" is listed twice", key, name));
        }
        seen.push_back(name);
        const auto lacks = [&](const char* what) {
            fail_at(v, fmt::format("{}: \"{}\" needs {}, which model \"{}\" does not have", key,
                                   name, what, model.name));
        };
        if (name == "core_attn") {
            out.core_attn = true;
        } else if (name == "layernorm") {
            out.layernorm = true;
        } else if (name == "mla_up_proj") {
            if (!model.is_mla()) lacks("multi-latent attention (model.attention = \"mla\")");
            out.mla_up_proj = true;
        } else if (name == "mlp") {
            if (model.moe_layers() >= model.layers) lacks("a dense layer (its MLP)");
            out.mlp = true;
        } else if (name == "moe" || name == "moe_act") {
            if (!model.is_moe()) lacks("MoE layers (model.experts)");
            (name == "moe" ? out.moe : out.moe_act) = true;
        } else if (name == "shared_experts") {
            if (!model.is_moe() || model.shared_experts <= 0) lacks("shared experts");
            out.shared_experts = true;
        } else if (name == "gdn_norm_out" || name == "gdp_in_proj" || name == "gdp_qkv" ||
                   name == "mhc") {
            fail_at(v, fmt::format("{}: \"{}\" recomputes a part (GatedDeltaNet / "
                                   "HyperConnection) prism's models do not have",
                                   key, name));
        } else {
            fail_at(v, fmt::format("{}: unknown module \"{}\"; expected one of core_attn, "
                                   "moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts",
                                   key, name));
        }
    }
}

void parse_training(const toml::table& root, const std::string& file, bool batch_in_space,
                    Experiment& experiment) {
    TrainingSpec& training = experiment.training;
    const toml::node* node = root.get("training");
    if (node == nullptr) {
        if (!batch_in_space) {
            fail_file(file, "missing [training] table (global_batch or global_batch_tokens)");
        }
        return;
    }
    const toml::table& table = as_table(*node, "training");
    check_keys(table, "training",
               {"global_batch",
                "global_batch_tokens",
                "precision",
                "optimizer",
                "total_tokens",
                "flash_attention",
                "overlap_grad_reduce",
                "overlap_param_gather",
                "tp_comm_overlap",
                "fp8_params",
                "fsdp_prefetch",
                "fsdp_pp_unsharded",
                "blocking_p2p",
                "bf16_optimizer",
                "grad_reduce_every_microbatch",
                "param_gather_every_microbatch",
                "fsdp_ends",
                "reduce_bucket_size",
                "stack",
                "first_stage_layers",
                "last_stage_layers",
                "layers_per_stage",
                "layers_per_chunk",
                "account_for_embedding_in_pipeline_split",
                "account_for_loss_in_pipeline_split",
                "grad_reduce_in_fp32",
                "pure_bf16",
                "dropout",
                "moe_dispatcher",
                "moe_a2a_overlap",
                "moe_capacity_factor",
                "moe_force_balance",
                "recompute_modules",
                "selective_recompute"});
    const toml::node* seqs = table.get("global_batch");
    const toml::node* tokens = table.get("global_batch_tokens");
    if (seqs != nullptr && tokens != nullptr) {
        fail_at(*tokens,
                "training.global_batch_tokens: give either global_batch (sequences) or "
                "global_batch_tokens, not both");
    }
    if (seqs != nullptr) {
        training.global_batch_seqs = as_integer_in(*seqs, "training.global_batch", 1, INT64_MAX);
    } else if (tokens != nullptr) {
        const double value = as_positive(*tokens, "training.global_batch_tokens");
        const std::int64_t seq = experiment.model.seq;
        if (value != std::floor(value) || std::fmod(value, static_cast<double>(seq)) != 0) {
            fail_at(*tokens, fmt::format("training.global_batch_tokens: {} is not a multiple of "
                                         "seq = {}",
                                         format_number(value), seq));
        }
        training.global_batch_seqs = static_cast<std::int64_t>(value) / seq;
    } else if (!batch_in_space) {
        throw error_at(table.source(),
                       "training: missing 'global_batch' (sequences) or 'global_batch_tokens'");
    }
    if (const toml::node* n = table.get("precision")) {
        training.precision = as_choice(*n, "training.precision", {"bf16", "fp8"}) == "bf16"
                                 ? Precision::bf16
                                 : Precision::fp8;
    }
    if (const toml::node* n = table.get("optimizer")) {
        as_choice(*n, "training.optimizer", {"adam"});
        training.optimizer = Optimizer::adam;
    }
    if (const toml::node* n = table.get("total_tokens")) {
        training.total_tokens = as_positive(*n, "training.total_tokens");
    }
    if (const toml::node* n = table.get("flash_attention")) {
        training.flash_attention = as_bool(*n, "training.flash_attention");
    }
    if (const toml::node* n = table.get("overlap_grad_reduce")) {
        training.overlap_grad_reduce = as_bool(*n, "training.overlap_grad_reduce");
    }
    if (const toml::node* n = table.get("fp8_params")) {
        training.fp8_params = as_bool(*n, "training.fp8_params");
        if (training.fp8_params && training.precision != Precision::fp8) {
            fail_at(*n, "training.fp8_params: FP8 parameters need precision = \"fp8\"");
        }
    }
    if (const toml::node* n = table.get("grad_reduce_in_fp32")) {
        training.grad_reduce_in_fp32 = as_bool(*n, "training.grad_reduce_in_fp32");
    }
    if (const toml::node* n = table.get("pure_bf16")) {
        training.pure_bf16 = as_bool(*n, "training.pure_bf16");
        if (training.pure_bf16 && training.precision != Precision::bf16) {
            fail_at(*n, "training.pure_bf16: pure bf16 training needs precision = \"bf16\"");
        }
        const toml::node* g = table.get("grad_reduce_in_fp32");
        if (training.pure_bf16 && g != nullptr && g->value_or(false)) {
            fail_at(*g,
                    "training.grad_reduce_in_fp32: pure_bf16 keeps no fp32 gradients; leave it "
                    "out or set it false");
        }
        if (training.pure_bf16) training.grad_reduce_in_fp32 = false;
    }
    if (const toml::node* n = table.get("dropout")) {
        training.dropout = as_bool(*n, "training.dropout");
    }
    if (const toml::node* n = table.get("moe_dispatcher")) {
        const std::string d = as_choice(*n, "training.moe_dispatcher",
                                        {"alltoall", "allgather", "deepep", "hybridep"});
        training.moe_dispatcher = d == "alltoall"    ? TrainingSpec::MoeDispatcher::alltoall
                                  : d == "allgather" ? TrainingSpec::MoeDispatcher::allgather
                                  : d == "deepep"    ? TrainingSpec::MoeDispatcher::deepep
                                                     : TrainingSpec::MoeDispatcher::hybridep;
    }
    if (const toml::node* n = table.get("moe_a2a_overlap")) {
        training.moe_a2a_overlap = as_bool(*n, "training.moe_a2a_overlap");
    }
    if (const toml::node* n = table.get("moe_capacity_factor")) {
        training.moe_capacity_factor = as_positive(*n, "training.moe_capacity_factor");
    }
    if (const toml::node* n = table.get("moe_force_balance")) {
        training.moe_force_balance = as_bool(*n, "training.moe_force_balance");
    }
    for (const char* key :
         {"moe_dispatcher", "moe_a2a_overlap", "moe_capacity_factor", "moe_force_balance"}) {
        if (const toml::node* n = table.get(key); n != nullptr && !experiment.model.is_moe()) {
            fail_at(*n, fmt::format("training.{}: needs an MoE model (model.experts)", key));
        }
    }
    if (const toml::node* n = table.get("recompute_modules")) {
        parse_recompute_modules(*n, experiment.model, training.recompute_modules);
    }
    if (const toml::node* n = table.get("fsdp_ends")) {
        training.fsdp_ends = fsdp_ends_of(*n, "training.fsdp_ends");
    }
    if (const toml::node* n = table.get("selective_recompute")) {
        training.selective_recompute = as_choice(*n, "training.selective_recompute",
                                                 kSelectiveRecomputeNames) == "torchtitan-op"
                                           ? TrainingSpec::SelectiveRecompute::torchtitan_op
                                           : TrainingSpec::SelectiveRecompute::megatron;
    }
    detail::apply_training_schedule_keys(table, experiment.model, training);
}

// ---- [hardware.<name>] -----------------------------------------------------------------------

struct HardwareField {
    const char* key;
    Quantity quantity;
    bool required;
    bool allow_zero;
    bool fraction;  // dimensionless in (0, 1]
    double& (*ref)(HardwareSpec&);
};

const HardwareField kHardwareFields[] = {
    {"peak_bf16", Quantity::flop_rate, true, false, false,
     [](HardwareSpec& h) -> double& { return h.gpu.peak_bf16_flop_per_s; }},
    {"peak_fp8", Quantity::flop_rate, false, true, false,
     [](HardwareSpec& h) -> double& { return h.gpu.peak_fp8_flop_per_s; }},
    {"hbm_capacity", Quantity::bytes, true, false, false,
     [](HardwareSpec& h) -> double& { return h.gpu.hbm_bytes; }},
    {"hbm_bandwidth", Quantity::bandwidth, true, false, false,
     [](HardwareSpec& h) -> double& { return h.gpu.hbm_bytes_per_s; }},
    {"hbm_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.gpu.hbm_efficiency; }},
    {"nvlink_bandwidth", Quantity::bandwidth, true, false, false,
     [](HardwareSpec& h) -> double& { return h.nvlink_bytes_per_s; }},
    {"nvlink_latency", Quantity::time, false, true, false,
     [](HardwareSpec& h) -> double& { return h.nvlink_latency_s; }},
    {"nic_bandwidth", Quantity::bandwidth, true, false, false,
     [](HardwareSpec& h) -> double& { return h.nic_bytes_per_s; }},
    {"nic_latency", Quantity::time, false, true, false,
     [](HardwareSpec& h) -> double& { return h.nic_latency_s; }},
    {"collective_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.collective_efficiency; }},
    {"collective_nic_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.collective_nic_efficiency; }},
    {"a2a_nvlink_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.a2a_nvlink_efficiency; }},
    {"a2a_nic_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.a2a_nic_efficiency; }},
    {"deepep_nvlink_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.deepep_nvlink_efficiency; }},
    {"hybridep_nvlink_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.hybridep_nvlink_efficiency; }},
    {"gemm_max_efficiency", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.gpu.gemm.max_efficiency; }},
    {"gemm_sustained", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.gpu.gemm_sustained; }},
    {"attention_sustained", Quantity::dimensionless, false, false, true,
     [](HardwareSpec& h) -> double& { return h.gpu.attention_sustained; }},
    {"gemm_half_flops", Quantity::dimensionless, false, false, false,
     [](HardwareSpec& h) -> double& { return h.gpu.gemm.half_flops; }},
    {"fp8_gemm_max_efficiency", Quantity::dimensionless, false, true, true,
     [](HardwareSpec& h) -> double& { return h.gpu.fp8_gemm_max_efficiency; }},
    {"attention_efficiency", Quantity::dimensionless, false, true, true,
     [](HardwareSpec& h) -> double& { return h.gpu.attention_efficiency; }},
    {"attention_efficiency_fa2", Quantity::dimensionless, false, true, true,
     [](HardwareSpec& h) -> double& { return h.gpu.attention_efficiency_fa2; }},
    {"attention_efficiency_fa3", Quantity::dimensionless, false, true, true,
     [](HardwareSpec& h) -> double& { return h.gpu.attention_efficiency_fa3; }},
    {"exp_rate", Quantity::dimensionless, false, true, false,
     [](HardwareSpec& h) -> double& { return h.gpu.exp_per_s; }},
    {"attention_exp_overlap", Quantity::dimensionless, false, true, true,
     [](HardwareSpec& h) -> double& { return h.gpu.attention_exp_overlap; }},
    {"kernel_launch", Quantity::time, false, true, false,
     [](HardwareSpec& h) -> double& { return h.kernel_launch_s; }},
};

void apply_hardware_fields(const toml::table& table, const std::string& path, bool is_preset,
                           HardwareSpec& hw, std::set<std::string>& seen,
                           std::vector<std::string>& overridden,
                           std::optional<toml::source_region>& domain_at) {
    std::vector<std::string> allowed{"gpus_per_node", "nvlink_domain",
                                     is_preset ? "source" : "preset"};
    for (const HardwareField& f : kHardwareFields) allowed.emplace_back(f.key);
    check_keys(table, path, allowed);
    for (const auto& [key, node] : in_file_order(table)) {
        const std::string name(key->str());
        const std::string full = join_key(path, name);
        if (name == "preset") continue;
        seen.insert(name);
        if (!is_preset) overridden.push_back(name);
        if (name == "source") {
            hw.gpu.source = as_string(*node, full);
        } else if (name == "gpus_per_node") {
            hw.gpus_per_node = as_int(*node, full, 1);
        } else if (name == "nvlink_domain") {
            hw.nvlink_domain = as_int(*node, full, 1);
            domain_at = node->source();
        } else {
            for (const HardwareField& f : kHardwareFields) {
                if (name != f.key) continue;
                const double value = as_quantity(*node, full, f.quantity, false, f.allow_zero);
                if (f.fraction && value > 1) {
                    fail_at(*node,
                            fmt::format("{}: value {} must be <= 1", full, format_number(value)));
                }
                f.ref(hw) = value;
            }
        }
    }
}

void parse_hardware(const toml::table& root, const std::string& file, Experiment& experiment) {
    const toml::node* node = root.get("hardware");
    if (node == nullptr) fail_file(file, "missing [hardware.<name>] table (at least one)");
    const toml::table& all = as_table(*node, "hardware");
    for (const auto& [key, value] : in_file_order(all)) {
        const std::string path = join_key("hardware", std::string(key->str()));
        const toml::table* table = value->as_table();
        if (table == nullptr) {
            fail_at(*value, fmt::format("{}: expected a table [hardware.<name>], got {}", path,
                                        detail::type_phrase(value->type())));
        }
        HardwareSpec hw;
        hw.name = std::string(key->str());
        hw.gpu.name = std::string(key->str());
        std::set<std::string> seen;
        std::vector<std::string> overridden;
        std::optional<toml::source_region> domain_at;
        if (const toml::node* preset = table->get("preset")) {
            const toml::table preset_table =
                load_preset("gpus", "gpu", *preset, join_key(path, "preset"));
            hw.gpu.name = as_string(*preset, join_key(path, "preset"));
            apply_hardware_fields(preset_table, path, true, hw, seen, overridden, domain_at);
            overridden.clear();
            // a preset's domain is reported at the experiment's preset key
            if (domain_at) domain_at = preset->source();
        }
        apply_hardware_fields(*table, path, false, hw, seen, overridden, domain_at);
        if (hw.nvlink_domain > 0 && hw.nvlink_domain % hw.gpus_per_node != 0) {
            throw error_at(
                domain_at.value_or(table->source()),
                fmt::format("{}: nvlink_domain = {} is not a multiple of "
                            "gpus_per_node = {} (an NVLink domain joins whole nodes)",
                            join_key(path, "nvlink_domain"), hw.nvlink_domain, hw.gpus_per_node));
        }
        if (table->get("preset") != nullptr && !overridden.empty()) {
            std::string list;
            for (const std::string& k : overridden) list += (list.empty() ? "" : ", ") + k;
            hw.gpu.source += fmt::format(" (overridden in the experiment: {})", list);
        }
        for (const HardwareField& f : kHardwareFields) {
            if (f.required && !seen.contains(f.key)) {
                throw error_at(table->source(),
                               fmt::format("{}: missing '{}' (give it or a preset)", path, f.key));
            }
        }
        experiment.hardware.push_back(std::move(hw));
    }
    if (experiment.hardware.empty()) {
        throw error_at(all.source(), "hardware: no [hardware.<name>] table (at least one)");
    }
}

// ---- the software stack: [training].stack or [stack] -------------------------------------------

/// A stack's factors on the hardware's kernel ceilings and its host time per kernel
/// (configs/presets/stacks, docs/calibration.md).
struct StackFactors {
    std::string name = "megatron-core";
    std::string source;
    std::string attention_kernel = "cudnn";
    double gemm = 1, fp8_gemm = 1, attention = 1, hbm = 1, collective = 1;
    double collective_nic = -1;  ///< across NVLink domains; < 0: `collective`
    double a2a_nvlink = 1, a2a_nic = 1, grouped_gemm = 1, permute = 1;  ///< MoE factors
    double grouped_gemm_wave_experts = 0;  ///< experts per curve call (0: all local experts)
    double overlap_compute_cost = 0;       ///< HardwareSpec::overlap_compute_cost
    double kernel_launch_s = 0;
    Fp8Cast fp8_cast = Fp8Cast::fused;  ///< fp8_cast = "fused" | "separate" | "te-linear"
    /// What recompute = "selective" means in the stack: "megatron" | "torchtitan-op"; none:
    /// the default (Megatron-Core's recompute_modules)
    std::optional<std::string> selective_recompute;
    /// FSDP under PP holds the stage gathered for the step (TrainingSpec::fsdp_pp_unsharded);
    /// none: the default (false)
    std::optional<bool> fsdp_pp_unsharded;
    /// DeepSpeed's pipeline sends on the compute stream (TrainingSpec::blocking_p2p); none: the
    /// default (false)
    std::optional<bool> blocking_p2p;
    /// DeepSpeed's BF16_Optimizer (TrainingSpec::bf16_optimizer); none: the default (false)
    std::optional<bool> bf16_optimizer;
    /// DeepSpeed's ZeRO-2 reduction in every microbatch
    /// (TrainingSpec::grad_reduce_every_microbatch); none: the default (false)
    std::optional<bool> grad_reduce_every_microbatch;
    /// FSDP1 SHARD_GRAD_OP's gather in every microbatch
    /// (TrainingSpec::param_gather_every_microbatch); none: the default (false)
    std::optional<bool> param_gather_every_microbatch;
    /// How FSDP shards the word embedding and the output layer (TrainingSpec::fsdp_ends); none:
    /// the default ("units")
    std::optional<TrainingSpec::FsdpEnds> fsdp_ends;
    /// DeepSpeed's ZeRO-1/2 gradient bucket (TrainingSpec::reduce_bucket_elements); none: the
    /// default (0)
    std::optional<double> reduce_bucket_elements;
    /// The GEMM libraries' workspaces the stack holds ([memory] workspace unless given there);
    /// none: default_memory_reserve()'s (TransformerEngine's)
    std::optional<double> workspace_bytes;
    std::map<std::string, std::pair<bool, const toml::node*>> overlaps;  ///< default overlaps
};

const std::vector<std::string> kStackOverlapKeys{"overlap_grad_reduce", "overlap_param_gather",
                                                 "tp_comm_overlap"};

void apply_stack_fields(const toml::table& table, const std::string& path, bool is_preset,
                        StackFactors& s) {
    std::vector<std::string> allowed{is_preset ? "source" : "preset",
                                     "attention_kernel",
                                     "fp8_cast",
                                     "selective_recompute",
                                     "fsdp_pp_unsharded",
                                     "blocking_p2p",
                                     "bf16_optimizer",
                                     "grad_reduce_every_microbatch",
                                     "param_gather_every_microbatch",
                                     "fsdp_ends",
                                     "reduce_bucket_size",
                                     "workspace",
                                     "gemm_efficiency",
                                     "fp8_gemm_efficiency",
                                     "attention_efficiency",
                                     "hbm_efficiency",
                                     "collective_efficiency",
                                     "collective_nic_efficiency",
                                     "kernel_launch",
                                     "a2a_nvlink_efficiency",
                                     "a2a_nic_efficiency",
                                     "grouped_gemm_efficiency",
                                     "permute_efficiency",
                                     "grouped_gemm_wave_experts",
                                     "overlap_compute_cost"};
    allowed.insert(allowed.end(), kStackOverlapKeys.begin(), kStackOverlapKeys.end());
    check_keys(table, path, allowed);
    for (const auto& [key, node] : in_file_order(table)) {
        const std::string name(key->str());
        const std::string full = join_key(path, name);
        if (name == "preset") continue;
        if (name == "source") {
            s.source = as_string(*node, full);
        } else if (name == "attention_kernel") {
            s.attention_kernel = as_choice(*node, full, {"cudnn", "fa2", "fa3"});
        } else if (name == "fp8_cast") {
            const std::string v = as_choice(*node, full, {"fused", "separate", "te-linear"});
            s.fp8_cast = v == "separate"    ? Fp8Cast::separate
                         : v == "te-linear" ? Fp8Cast::te_linear
                                            : Fp8Cast::fused;
        } else if (name == "selective_recompute") {
            s.selective_recompute = as_choice(*node, full, kSelectiveRecomputeNames);
        } else if (name == "fsdp_pp_unsharded") {
            s.fsdp_pp_unsharded = as_bool(*node, full);
        } else if (name == "blocking_p2p") {
            s.blocking_p2p = as_bool(*node, full);
        } else if (name == "bf16_optimizer") {
            s.bf16_optimizer = as_bool(*node, full);
        } else if (name == "grad_reduce_every_microbatch") {
            s.grad_reduce_every_microbatch = as_bool(*node, full);
        } else if (name == "param_gather_every_microbatch") {
            s.param_gather_every_microbatch = as_bool(*node, full);
        } else if (name == "fsdp_ends") {
            s.fsdp_ends = fsdp_ends_of(*node, full);
        } else if (name == "reduce_bucket_size") {
            s.reduce_bucket_elements = as_positive(*node, full, true);
        } else if (name == "workspace") {
            s.workspace_bytes = as_quantity(*node, full, Quantity::bytes, false, true);
        } else if (name == "kernel_launch") {
            s.kernel_launch_s = as_quantity(*node, full, Quantity::time, false, true);
        } else if (name == "grouped_gemm_wave_experts") {
            s.grouped_gemm_wave_experts = as_positive(*node, full);
            if (s.grouped_gemm_wave_experts < 1) {
                fail_at(*node, fmt::format("{}: value {} must be >= 1 (experts whose GEMMs fill "
                                           "the GPU together)",
                                           full, format_number(s.grouped_gemm_wave_experts)));
            }
        } else if (name == "overlap_compute_cost") {
            s.overlap_compute_cost = as_positive(*node, full, true);
            if (s.overlap_compute_cost >= 1) {
                fail_at(*node, fmt::format("{}: value {} must be < 1 (the fraction of an "
                                           "overlapped collective's time its compute loses)",
                                           full, format_number(s.overlap_compute_cost)));
            }
        } else if (std::find(kStackOverlapKeys.begin(), kStackOverlapKeys.end(), name) !=
                   kStackOverlapKeys.end()) {
            s.overlaps[name] = {as_bool(*node, full), node};
        } else {
            const double value = as_positive(*node, full);
            if (value > 1) {
                fail_at(*node,
                        fmt::format("{}: value {} must be <= 1 (a fraction of the hardware's "
                                    "kernel ceiling)",
                                    full, format_number(value)));
            }
            (name == "gemm_efficiency"             ? s.gemm
             : name == "fp8_gemm_efficiency"       ? s.fp8_gemm
             : name == "attention_efficiency"      ? s.attention
             : name == "hbm_efficiency"            ? s.hbm
             : name == "collective_nic_efficiency" ? s.collective_nic
             : name == "a2a_nvlink_efficiency"     ? s.a2a_nvlink
             : name == "a2a_nic_efficiency"        ? s.a2a_nic
             : name == "grouped_gemm_efficiency"   ? s.grouped_gemm
             : name == "permute_efficiency"        ? s.permute
                                                   : s.collective) = value;
        }
    }
}

/// The stack of the experiment: [training].stack names a preset, [stack] names one (`preset`)
/// and may override its values; neither: megatron-core. Applied to every [hardware.<name>]:
/// each efficiency becomes the hardware's kernel ceiling times the stack's factor, the host
/// time per kernel the hardware's plus the stack's, and the overlaps [training] does not name
/// take the stack's defaults. Returns the stack's GEMM workspace bytes, if it names them (the
/// memory reserve is filled later: apply_stack_defaults, then [memory]).
std::optional<double> apply_stack(const toml::table& root, Experiment& e) {
    const toml::node* by_training = root["training"]["stack"].node();
    const toml::table* table =
        root.get("stack") != nullptr ? root.get("stack")->as_table() : nullptr;
    if (by_training != nullptr && table != nullptr) {
        fail_at(
            *by_training,
            "training.stack: give the stack either here or in [stack] (preset = ...), not both");
    }
    StackFactors s;
    if (by_training != nullptr) {
        s.name = as_string(*by_training, "training.stack");
        apply_stack_fields(load_preset("stacks", "stack", *by_training, "training.stack"),
                           "training.stack", true, s);
    } else if (table != nullptr && table->get("preset") != nullptr) {
        const toml::node& preset = *table->get("preset");
        s.name = as_string(preset, "stack.preset");
        apply_stack_fields(load_preset("stacks", "stack", preset, "stack.preset"), "stack.preset",
                           true, s);
    } else {
        const std::optional<std::string_view> text = preset_text("stacks", s.name);
        if (text) {
            apply_stack_fields(parse_toml(*text, preset_path("stacks", s.name)), "stack", true, s);
        }
    }
    std::string overridden;
    if (table != nullptr) {
        apply_stack_fields(*table, "stack", false, s);
        for (const auto& [key, node] : in_file_order(*table)) {
            if (std::string(key->str()) != "preset") {
                overridden += (overridden.empty() ? "" : ", ") + std::string(key->str());
            }
        }
    }
    if (s.selective_recompute && !root["training"]["selective_recompute"]) {
        e.training.selective_recompute = *s.selective_recompute == "torchtitan-op"
                                             ? TrainingSpec::SelectiveRecompute::torchtitan_op
                                             : TrainingSpec::SelectiveRecompute::megatron;
    }
    if (s.fsdp_pp_unsharded && !root["training"]["fsdp_pp_unsharded"]) {
        e.training.fsdp_pp_unsharded = *s.fsdp_pp_unsharded;
    }
    if (s.blocking_p2p && !root["training"]["blocking_p2p"]) {
        e.training.blocking_p2p = *s.blocking_p2p;
    }
    if (s.bf16_optimizer && !root["training"]["bf16_optimizer"]) {
        e.training.bf16_optimizer = *s.bf16_optimizer;
    }
    if (s.grad_reduce_every_microbatch && !root["training"]["grad_reduce_every_microbatch"]) {
        e.training.grad_reduce_every_microbatch = *s.grad_reduce_every_microbatch;
    }
    if (s.param_gather_every_microbatch && !root["training"]["param_gather_every_microbatch"]) {
        e.training.param_gather_every_microbatch = *s.param_gather_every_microbatch;
    }
    if (s.fsdp_ends && !root["training"]["fsdp_ends"]) e.training.fsdp_ends = *s.fsdp_ends;
    if (s.reduce_bucket_elements && !root["training"]["reduce_bucket_size"]) {
        e.training.reduce_bucket_elements = *s.reduce_bucket_elements;
    }
    for (const auto& [key, value] : s.overlaps) {
        if (root["training"][key]) continue;
        bool& flag = key == "overlap_grad_reduce"    ? e.training.overlap_grad_reduce
                     : key == "overlap_param_gather" ? e.training.overlap_param_gather
                                                     : e.training.tp_comm_overlap;
        flag = value.first;
    }
    for (HardwareSpec& hw : e.hardware) {
        GpuSpec& g = hw.gpu;
        g.gemm.max_efficiency *= s.gemm * g.gemm_sustained;
        if (g.fp8_gemm_max_efficiency > 0) g.fp8_gemm_max_efficiency *= s.fp8_gemm;
        const double ceiling = s.attention_kernel == "fa3" && g.attention_efficiency_fa3 > 0
                                   ? g.attention_efficiency_fa3
                               : s.attention_kernel == "fa2" && g.attention_efficiency_fa2 > 0
                                   ? g.attention_efficiency_fa2
                                   : g.attention_efficiency;
        // at the GPU's sustained fraction (its power limit) times the stack's factor; both slow
        // the whole kernel: its exponentials too
        g.attention_efficiency = ceiling * s.attention * g.attention_sustained;
        g.exp_per_s *= s.attention * g.attention_sustained;
        g.hbm_efficiency *= s.hbm;
        // across NVLink domains: the hardware's own ceiling there (or its collective one) times
        // the stack's factor there (or its collective one)
        if (hw.collective_nic_efficiency <= 0)
            hw.collective_nic_efficiency = hw.collective_efficiency;
        hw.collective_nic_efficiency *= s.collective_nic < 0 ? s.collective : s.collective_nic;
        hw.collective_efficiency *= s.collective;
        // MoE dispatch / combine: the GPU's a2a ceiling per link level times the stack's factor
        // (a GPU without one falls back to its collective efficiency, the stack's included)
        hw.a2a_nvlink_efficiency *= s.a2a_nvlink;
        hw.deepep_nvlink_efficiency *= s.a2a_nvlink;
        hw.hybridep_nvlink_efficiency *= s.a2a_nvlink;
        hw.a2a_nic_efficiency *= s.a2a_nic;
        hw.grouped_gemm_factor *= s.grouped_gemm;
        hw.permute_factor *= s.permute;
        hw.grouped_gemm_wave_experts = s.grouped_gemm_wave_experts;
        hw.overlap_compute_cost = s.overlap_compute_cost;
        hw.kernel_launch_s += s.kernel_launch_s;
        hw.fp8_cast = s.fp8_cast;
        g.source +=
            fmt::format("; stack {}{}{}", s.name, s.source.empty() ? "" : " (" + s.source + ")",
                        overridden.empty() ? "" : " (overridden: " + overridden + ")");
    }
    return s.workspace_bytes;
}

// ---- [cluster] -------------------------------------------------------------------------------

void parse_cluster(const toml::table& table, ClusterSpec& cluster) {
    check_keys(table, "cluster",
               {"nodes_per_rack", "racks_per_pod", "rack_oversubscription", "pod_oversubscription",
                "total_gpus"});
    for (const auto& [key, node] : in_file_order(table)) {
        const std::string name(key->str());
        const std::string full = join_key("cluster", name);
        if (name == "nodes_per_rack") {
            cluster.nodes_per_rack = as_int(*node, full, 1);
        } else if (name == "racks_per_pod") {
            cluster.racks_per_pod = as_int(*node, full, 1);
        } else if (name == "total_gpus") {
            cluster.total_gpus = as_integer_in(*node, full, 0, INT64_MAX);
        } else {
            const double value = as_positive(*node, full);
            if (value < 1) {
                fail_at(*node, fmt::format("{}: value {} must be >= 1 (a bandwidth divisor)", full,
                                           format_number(value)));
            }
            (name == "rack_oversubscription" ? cluster.rack_oversubscription
                                             : cluster.pod_oversubscription) = value;
        }
    }
}

// ---- design dimensions: [defaults], [space], experiment.baseline -------------------------------

std::vector<std::string> dimension_names() {
    std::vector<std::string> names;
    for (const DimensionInfo& info : design_dimensions()) names.push_back(info.name);
    return names;
}

// Dimensions given as a quantity with a unit; a bare number is in the SI unit.
std::optional<Quantity> dimension_quantity(const std::string& name) {
    if (name == "checkpoint_interval") return Quantity::time;
    return std::nullopt;
}

DimensionValue read_dimension_value(const toml::node& node, const DimensionInfo& info,
                                    const std::string& key) {
    DimensionValue value;
    if (const auto quantity = dimension_quantity(info.name)) {
        value.type = DimensionValue::Type::number;
        value.d = as_quantity(node, key, *quantity, true, true);
        return value;
    }
    value.type = info.type;
    switch (info.type) {
        case DimensionValue::Type::integer:
            value.i = as_integer(node, key);
            break;
        case DimensionValue::Type::number:
            value.d = as_number(node, key);
            break;
        case DimensionValue::Type::string:
            value.s = as_string(node, key);
            break;
        case DimensionValue::Type::boolean:
            value.b = as_bool(node, key);
            break;
    }
    return value;
}

bool same_value(const DimensionValue& a, const DimensionValue& b) {
    return a.type == b.type && a.i == b.i && a.d == b.d && a.s == b.s && a.b == b.b;
}

std::string describe_value(const DimensionValue& v) {
    switch (v.type) {
        case DimensionValue::Type::integer:
            return std::to_string(v.i);
        case DimensionValue::Type::number:
            return format_number(v.d);
        case DimensionValue::Type::string:
            return fmt::format("\"{}\"", v.s);
        case DimensionValue::Type::boolean:
            return v.b ? "true" : "false";
    }
    return "?";
}

// apply_dimension's messages name the dimension ("tp: value 0 must be >= 1", possibly with a
// "space." prefix); re-say them with the section they came from and the value's location.
[[noreturn]] void relocate(const ConfigError& error, const toml::node& at, std::string_view section,
                           const std::string& name) {
    std::string message = error.what();
    const std::string bare = name + ":";
    const std::string spaced = "space." + name + ":";
    if (message.starts_with(bare)) {
        message = fmt::format("{}.{}", section, message);
    } else if (message.starts_with(spaced)) {
        message = fmt::format("{}.{}", section, message.substr(6));
    } else {
        message = fmt::format("{}.{}: {}", section, name, message);
    }
    fail_at(at, message);
}

void apply_located(const Experiment& experiment, const Dimension& dim, std::size_t index,
                   DesignPoint& point, const toml::node& at, std::string_view section) {
    try {
        apply_dimension(experiment, dim, index, point);
    } catch (const ConfigError& e) {
        relocate(e, at, section, dim.name);
    }
}

/// Applies a table of scalar dimension values ([defaults], experiment.baseline) onto `point`:
/// every key in file order, `gpus` last (dp = gpus / (tp pp cp) with the final tp, pp, cp).
/// Returns the gpus value when given.
std::optional<DimensionValue> apply_point_table(const Experiment& experiment,
                                                const toml::table& table,
                                                const std::string& section, DesignPoint& point) {
    check_keys(table, section, dimension_names());
    const toml::node* gpus = table.get("gpus");
    if (gpus != nullptr && table.get("dp") != nullptr) {
        fail_at(*gpus, fmt::format("{}.gpus: dp and gpus are mutually exclusive (gpus sets dp = "
                                   "gpus / (tp*pp*cp))",
                                   section));
    }
    for (const auto& [key, node] : in_file_order(table)) {
        if (std::string(key->str()) == "gpus") continue;
        const DimensionInfo& info = *find_dimension(std::string(key->str()));
        Dimension dim{
            std::string(key->str()),
            {read_dimension_value(*node, info, join_key(section, std::string(key->str())))}};
        apply_located(experiment, dim, 0, point, *node, section);
    }
    if (gpus == nullptr) return std::nullopt;
    const std::string key = join_key(section, "gpus");
    Dimension dim{"gpus", {read_dimension_value(*gpus, *find_dimension("gpus"), key)}};
    apply_located(experiment, dim, 0, point, *gpus, section);
    const std::int64_t per_replica = std::int64_t{point.tp} * point.pp * point.cp;
    const std::int64_t total = dim.values[0].i;
    if (total % per_replica != 0) {
        fail_at(*gpus,
                fmt::format("{}: {} is not a multiple of tp*pp*cp = {}", key, total, per_replica));
    }
    point.dp = static_cast<int>(total / per_replica);
    return dim.values[0];
}

/// `[space] scenarios`: names of [space] dimensions (default: b_noise where [space] lists it).
void parse_scenarios(const toml::table& table, Experiment& experiment) {
    std::vector<std::string> listed;
    for (const auto& d : experiment.space.dimensions) listed.push_back(d.name);
    const toml::node* node = table.get("scenarios");
    if (node == nullptr) {
        if (table.get("b_noise") != nullptr) experiment.space.scenarios = {"b_noise"};
        return;
    }
    const toml::array& names = as_array(*node, "space.scenarios");
    std::vector<std::string> chosen;
    for (const toml::node& element : names) {
        const std::string name = as_string(element, "space.scenarios");
        if (std::find(listed.begin(), listed.end(), name) == listed.end()) {
            fail_at(element,
                    fmt::format("space.scenarios: '{}' is not a dimension of [space] "
                                "(listed: {}){}",
                                name, fmt::join(listed, ", "), did_you_mean(name, listed)));
        }
        if (std::find(chosen.begin(), chosen.end(), name) != chosen.end())
            fail_at(element, fmt::format("space.scenarios: '{}' is named twice", name));
        chosen.push_back(name);
    }
    if (!chosen.empty() && chosen.size() == listed.size()) {
        fail_at(*node,
                "space.scenarios: every [space] dimension is a scenario; leave at least one "
                "that the study decides");
    }
    for (const std::string& name : listed) {  // [space] order
        if (std::find(chosen.begin(), chosen.end(), name) != chosen.end())
            experiment.space.scenarios.push_back(name);
    }
}

void parse_space(const toml::table& table, Experiment& experiment) {
    std::vector<std::string> allowed = dimension_names();
    allowed.push_back("scenarios");
    check_keys(table, "space", allowed);
    const toml::node* dp = table.get("dp");
    const toml::node* gpus = table.get("gpus");
    if (dp != nullptr && gpus != nullptr) {
        const toml::key& later = dp->source().begin.line > gpus->source().begin.line
                                     ? table.lower_bound("dp")->first
                                     : table.lower_bound("gpus")->first;
        fail_at(later, fmt::format("space.{}: dp and gpus are mutually exclusive (gpus sets dp = "
                                   "gpus / (tp*pp*cp))",
                                   later.str()));
    }
    for (const auto& [key, node] : in_file_order(table)) {
        if (key->str() == "scenarios") continue;  // parse_scenarios, once the dimensions are read
        const std::string full = join_key("space", std::string(key->str()));
        const DimensionInfo& info = *find_dimension(std::string(key->str()));
        const toml::array& values = as_array(*node, full);
        if (values.empty())
            fail_at(*node, fmt::format("{}: empty list; give at least one value", full));
        Dimension dim{std::string(key->str()), {}};
        for (const toml::node& element : values) {
            DimensionValue value = read_dimension_value(element, info, full);
            for (const DimensionValue& earlier : dim.values) {
                if (same_value(earlier, value)) {
                    fail_at(element,
                            fmt::format("{}: duplicate value {}", full, describe_value(value)));
                }
            }
            dim.values.push_back(std::move(value));
        }
        for (std::size_t i = 0; i < dim.values.size(); ++i) {
            DesignPoint scratch = experiment.defaults;
            apply_located(experiment, dim, i, scratch, *values.get(i), "space");
        }
        experiment.space.dimensions.push_back(std::move(dim));
    }
    parse_scenarios(table, experiment);
}

// ---- [failures] ------------------------------------------------------------------------------

void parse_failures(const toml::table& table, bool interval_in_space, FailureSpec& failures) {
    check_keys(table, "failures",
               {"enabled", "detection", "restart", "checkpoint_policy", "checkpoint_interval",
                "checkpoint_bandwidth", "async_checkpoint", "deadlines", "cause",
                "straggler_detection", "straggler_threshold", "straggler_replacement"});
    if (const toml::node* n = table.get("enabled")) {
        failures.enabled = as_bool(*n, "failures.enabled");
    }
    if (const toml::node* n = table.get("detection")) {
        failures.detection_s = as_quantity(*n, "failures.detection", Quantity::time, false, true);
    }
    if (const toml::node* n = table.get("restart")) {
        failures.restart_s = as_quantity(*n, "failures.restart", Quantity::time, false, true);
    }
    if (const toml::node* n = table.get("checkpoint_policy")) {
        const std::string policy =
            as_choice(*n, "failures.checkpoint_policy", {"fixed", "young_daly", "optimal"});
        failures.checkpoint_policy = policy == "fixed"        ? CheckpointPolicy::fixed
                                     : policy == "young_daly" ? CheckpointPolicy::young_daly
                                                              : CheckpointPolicy::optimal;
    }
    if (const toml::node* n = table.get("checkpoint_interval")) {
        failures.checkpoint_interval_s =
            as_quantity(*n, "failures.checkpoint_interval", Quantity::time);
    }
    if (const toml::node* n = table.get("checkpoint_bandwidth")) {
        failures.checkpoint_bytes_per_s =
            as_quantity(*n, "failures.checkpoint_bandwidth", Quantity::bandwidth);
    }
    if (const toml::node* n = table.get("async_checkpoint")) {
        failures.async_checkpoint = as_bool(*n, "failures.async_checkpoint");
    }
    if (const toml::node* n = table.get("straggler_detection")) {
        failures.straggler_detection_s =
            as_quantity(*n, "failures.straggler_detection", Quantity::time);
    }
    if (const toml::node* n = table.get("straggler_threshold")) {
        failures.straggler_threshold = as_number(*n, "failures.straggler_threshold");
        if (!(failures.straggler_threshold > 0)) {
            fail_at(*n, fmt::format("failures.straggler_threshold: {} must be > 0 (the relative "
                                    "slowdown of the mean step that flags a straggler)",
                                    format_number(failures.straggler_threshold)));
        }
    }
    failures.straggler_replacement_s = failures.restart_s;
    if (const toml::node* n = table.get("straggler_replacement")) {
        if (table.get("straggler_detection") == nullptr) {
            fail_at(*n,
                    "failures.straggler_replacement: needs failures.straggler_detection (when "
                    "a straggler is drained)");
        }
        failures.straggler_replacement_s =
            as_quantity(*n, "failures.straggler_replacement", Quantity::time, false, true);
    }
    if (const toml::node* n = table.get("deadlines")) {
        for (const toml::node& v : as_array(*n, "failures.deadlines")) {
            failures.deadlines_s.push_back(as_quantity(v, "failures.deadlines", Quantity::time));
        }
    }
    if (const toml::node* n = table.get("cause")) {
        const toml::array& causes = as_array(*n, "failures.cause");
        for (std::size_t i = 0; i < causes.size(); ++i) {
            const std::string path = fmt::format("failures.cause[{}]", i);
            const toml::table& cause_table = as_table(causes[i], path);
            check_keys(cause_table, path, {"name", "scope", "mtbf", "weibull_shape"});
            FailureCause cause;
            const toml::node* mtbf = cause_table.get("mtbf");
            if (mtbf == nullptr) {
                throw error_at(cause_table.source(), fmt::format("{}: missing 'mtbf'", path));
            }
            cause.mtbf_s = as_quantity(*mtbf, join_key(path, "mtbf"), Quantity::time);
            cause.name = fmt::format("cause{}", i);
            if (const toml::node* v = cause_table.get("name")) {
                cause.name = as_string(*v, join_key(path, "name"));
            }
            if (const toml::node* v = cause_table.get("scope")) {
                cause.per_node = as_choice(*v, join_key(path, "scope"), {"gpu", "node"}) == "node";
            }
            if (const toml::node* v = cause_table.get("weibull_shape")) {
                cause.weibull_shape = as_positive(*v, join_key(path, "weibull_shape"));
            }
            failures.causes.push_back(std::move(cause));
        }
    }
    if (failures.checkpoint_policy == CheckpointPolicy::fixed &&
        failures.checkpoint_interval_s <= 0 && !interval_in_space) {
        const toml::node* n = table.get("checkpoint_policy");
        throw error_at(n->source(),
                       "failures.checkpoint_policy: \"fixed\" needs checkpoint_interval (here "
                       "or in [space] / [defaults])");
    }
    if (failures.enabled && failures.causes.empty()) {
        throw error_at(table.get("enabled")->source(),
                       "failures.enabled: true needs at least one [[failures.cause]]");
    }
}

// ---- [variability] -----------------------------------------------------------------------------

// A preset value ending in ".toml" is a profile file (prism trace fit / steps fit writes
// them), relative to the experiment file's directory.
toml::table load_profile_file(const toml::node& node, const std::string& name,
                              const std::string& source_name, std::vector<IncludedFile>& included) {
    const std::filesystem::path path =
        std::filesystem::path(source_name).parent_path() / std::filesystem::path(name);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        fail_at(node, fmt::format("variability.preset: cannot read the profile file '{}' "
                                  "(looked for {})",
                                  name, path.string()));
    }
    std::string text;
    try {
        text = read_profile_text(path);  // limited in size; a directory or empty file refused
    } catch (const ConfigError& e) {
        fail_at(node, fmt::format("variability.preset: '{}': {}", name, e.what()));
    }
    included.push_back({name, text});
    return parse_toml(text, path.string());
}

void parse_variability(const toml::table& table, const std::string& source_name,
                       Experiment& experiment) {
    VariabilitySpec& variability = experiment.variability;
    if (const toml::node* preset = table.get("preset")) {
        const std::string& name = as_string(*preset, "variability.preset");
        const toml::table preset_file =
            name.ends_with(".toml")
                ? load_profile_file(*preset, name, source_name, experiment.included)
                : load_preset("variability", "variability", *preset, "variability.preset");
        detail::apply_variability_file(preset_file, name, variability);
    }
    detail::apply_variability_table(table, "variability", false, variability);
}

// ---- [objectives] ------------------------------------------------------------------------------

void parse_objectives(const toml::table& table, Experiment& experiment) {
    check_keys(table, "objectives", {"minimize", "maximize"});
    const MetricSchema schema = metric_schema(experiment);
    for (const auto& [key, node] : in_file_order(table)) {
        const std::string full = join_key("objectives", std::string(key->str()));
        for (const toml::node& element : as_array(*node, full)) {
            const std::string& metric = as_string(element, full);
            if (find_metric(schema, metric) < 0) {
                fail_at(element, fmt::format("{}: unknown metric '{}'{}", full, metric,
                                             metric_suggestion(metric, schema)));
            }
            for (const Objective& earlier : experiment.objectives) {
                if (earlier.metric == metric) {
                    fail_at(element,
                            fmt::format("{}: metric '{}' is already an objective", full, metric));
                }
            }
            experiment.objectives.push_back(
                Objective{metric, std::string(key->str()) == "maximize"});
        }
    }
}

/// The defaults that follow the hardware and the way people train (docs/experiments.md,
/// "Defaults"): fused attention when every GPU of the experiment has a fitted fused-attention
/// efficiency (H100, H200, B200 presets; the A100 preset's published runs are unfused), sequence
/// parallelism whenever tp > 1 unless [defaults] or [space] name it, the memory reserve and
/// usable fraction of memory.hpp.
void apply_stack_defaults(const toml::table& root, Experiment& e) {
    if (!root["training"]["flash_attention"]) {
        e.training.flash_attention =
            !e.hardware.empty() &&
            std::all_of(e.hardware.begin(), e.hardware.end(),
                        [](const HardwareSpec& hw) { return hw.gpu.attention_efficiency > 0; });
    }
    e.sequence_parallel_follows_tp =
        !root["defaults"]["sequence_parallel"] && !root["space"]["sequence_parallel"];
    e.constraints.max_memory_fraction = kDefaultMaxMemoryFraction;
    e.memory_reserve = default_memory_reserve();
}

/// With scenario dimensions of more than one scenario, pruning is off unless [evaluation] asks
/// for it: a pruned row has no stochastic metrics, and the robust pick across scenarios needs
/// every configuration's in every scenario (explorer/scenarios.hpp).
void prune_default_with_scenarios(const toml::table& root, Experiment& e) {
    if (root["evaluation"]["prune"]) return;
    std::size_t scenarios = 1;
    for (const auto& d : e.space.dimensions) {
        if (std::find(e.space.scenarios.begin(), e.space.scenarios.end(), d.name) !=
            e.space.scenarios.end())
            scenarios *= d.values.size();
    }
    if (scenarios > 1) e.evaluation.prune = false;
}

/// Whether a point of the experiment can have recompute = "selective" ([defaults] or [space]).
bool any_selective_point(const Experiment& e) {
    const auto& dims = e.space.dimensions;
    return e.defaults.recompute == Recompute::selective ||
           std::any_of(dims.begin(), dims.end(), [](const Dimension& d) {
               return d.name == "recompute" &&
                      std::any_of(d.values.begin(), d.values.end(),
                                  [](const DimensionValue& v) { return v.s == "selective"; });
           });
}

/// torchtitan's op-level selective checkpointing (docs/torchtitan_sac.md) is modelled for
/// dense models with standard attention run by SDPA's fused kernels, and replaces Megatron's
/// recompute_modules: where a selective point takes it, anything else is an error, reported at
/// the key that chose it ([training] or [stack] selective_recompute, else the stack's name).
void check_selective_recompute(const toml::table& root, const Experiment& e) {
    if (!e.training.torchtitan_op_sac() || !any_selective_point(e)) return;
    std::pair<const toml::node*, std::string> chosen{nullptr, ""};
    for (const auto& [node, key] :
         {std::pair{root["training"]["selective_recompute"].node(), "training.selective_recompute"},
          std::pair{root["stack"]["selective_recompute"].node(), "stack.selective_recompute"},
          std::pair{root["training"]["stack"].node(), "training.stack"},
          std::pair{root["stack"]["preset"].node(), "stack.preset"}}) {
        if (node != nullptr) {
            chosen = {node, key};
            break;
        }
    }
    const auto fail = [&](const std::string& why) {
        const std::string what =
            chosen.second.find("selective_recompute") != std::string::npos
                ? fmt::format("{}: \"torchtitan-op\"", chosen.second)
                : fmt::format("{}: the stack's selective_recompute = \"torchtitan-op\"",
                              chosen.second);
        if (chosen.first != nullptr) fail_at(*chosen.first, what + " " + why);
        throw error_at(root.source(), what + " " + why);
    };
    if (const toml::node* n = root["training"]["recompute_modules"].node()) {
        fail_at(*n, fmt::format("training.recompute_modules: Megatron-Core's modules, but the "
                                "selective points recompute by torchtitan's op policy "
                                "(selective_recompute = \"torchtitan-op\", from {}); give "
                                "selective_recompute = \"megatron\" to use the modules",
                                chosen.second.empty() ? "the stack" : chosen.second));
    }
    if (e.model.is_moe()) {
        fail("is modelled for dense models: model.experts = " + std::to_string(e.model.experts) +
             " (MoE) with recompute = \"selective\"");
    }
    if (e.model.is_mla()) {
        fail(
            "is modelled for standard attention: model.attention = \"mla\" with recompute = "
            "\"selective\"");
    }
    if (!e.training.flash_attention) {
        fail(
            "saves the outputs of SDPA's fused attention kernels: needs flash_attention = true "
            "with recompute = \"selective\"");
    }
}

const toml::table* optional_table(const toml::table& root, std::string_view key) {
    const toml::node* node = root.get(key);
    return node == nullptr ? nullptr : &as_table(*node, key);
}

}  // namespace

prism::Experiment parse_experiment(std::string_view text, const std::string& source_name) {
    Experiment experiment;
    experiment.file = source_name;
    experiment.text = std::string(text);

    const toml::table root = parse_toml(text, source_name);
    check_keys(root, "", kTopLevelKeys);
    for (const auto& [key, node] : in_file_order(root)) as_table(*node, std::string(key->str()));

    const toml::table* space = optional_table(root, "space");
    const toml::table* defaults = optional_table(root, "defaults");
    const bool batch_in_space = (space != nullptr && space->get("global_batch") != nullptr) ||
                                (defaults != nullptr && defaults->get("global_batch") != nullptr);

    if (const toml::table* t = optional_table(root, "experiment")) {
        parse_experiment_table(*t, experiment);
    }
    if (experiment.name.empty()) {
        experiment.name = std::filesystem::path(source_name).stem().string();
    }
    parse_model(root, source_name, experiment);
    parse_training(root, source_name, batch_in_space, experiment);
    parse_hardware(root, source_name, experiment);
    const std::optional<double> stack_workspace = apply_stack(root, experiment);
    if (experiment.training.precision == Precision::fp8) {
        for (const HardwareSpec& hw : experiment.hardware) {
            if (hw.gpu.peak_fp8_flop_per_s <= 0) {
                fail_at(*root["training"]["precision"].node(),
                        fmt::format("training.precision: \"fp8\" needs peak_fp8, which "
                                    "[hardware.{}] does not have",
                                    hw.name));
            }
        }
    }
    if (const toml::table* t = optional_table(root, "cluster"))
        parse_cluster(*t, experiment.cluster);
    if (const toml::table* t = optional_table(root, "variability")) {
        parse_variability(*t, source_name, experiment);
    }
    if (const toml::table* t = optional_table(root, "evaluation")) {
        detail::parse_evaluation(*t, experiment.evaluation);
    }
    if (const toml::table* t = optional_table(root, "failures")) {
        const bool interval_in_space =
            (space != nullptr && space->get("checkpoint_interval") != nullptr) ||
            (defaults != nullptr && defaults->get("checkpoint_interval") != nullptr);
        parse_failures(*t, interval_in_space, experiment.failures);
    }

    std::optional<DimensionValue> default_gpus;
    if (defaults != nullptr) {
        default_gpus = apply_point_table(experiment, *defaults, "defaults", experiment.defaults);
    }
    if (space != nullptr) parse_space(*space, experiment);
    prune_default_with_scenarios(root, experiment);
    if (const toml::node* n = root["training"]["recompute_modules"].node()) {
        // as Megatron-Core, the modules apply to selective recomputation only
        if (!any_selective_point(experiment)) {
            fail_at(*n,
                    "training.recompute_modules: applies to recompute = \"selective\" (as "
                    "Megatron-Core's --recompute-modules), which no point of the experiment uses");
        }
    }
    if (default_gpus) {
        // gpus in [defaults] fixes the total while [space] varies tp/pp/cp: it becomes a
        // one-value `gpus` dimension so that decode_point derives dp per point.
        const auto& dims = experiment.space.dimensions;
        const auto named = [&](const char* name) {
            return std::any_of(dims.begin(), dims.end(),
                               [&](const Dimension& d) { return d.name == name; });
        };
        if (named("dp")) {
            fail_at(*space->get("dp"),
                    "space.dp: dp and gpus are mutually exclusive ([defaults] "
                    "sets gpus)");
        }
        if (!named("gpus")) {
            experiment.space.dimensions.push_back(Dimension{"gpus", {*default_gpus}});
        }
    }

    if (const toml::table* t = optional_table(root, "cotune")) detail::parse_cotune(*t, experiment);
    detail::check_b_noise_dimension(root, experiment);
    apply_stack_defaults(root, experiment);
    check_selective_recompute(root, experiment);
    if (stack_workspace) experiment.memory_reserve.workspace_bytes = *stack_workspace;
    if (const toml::table* t = optional_table(root, "constraints")) {
        detail::parse_constraints(*t, experiment.constraints);
    }
    if (const toml::table* t = optional_table(root, "memory")) {
        detail::parse_memory(*t, experiment.memory_reserve);
    }
    if (const toml::table* t = optional_table(root, "experiment")) {
        if (const toml::node* node = t->get("baseline")) {
            DesignPoint baseline = experiment.defaults;
            const toml::table& table = as_table(*node, "experiment.baseline");
            apply_point_table(experiment, table, "experiment.baseline", baseline);
            if (table.get("sequence_parallel") == nullptr) {
                resolve_point_defaults(experiment, baseline);
            }
            if (default_gpus && table.get("gpus") == nullptr && table.get("dp") == nullptr) {
                // Like every point, the baseline keeps the total of [defaults].gpus.
                const std::int64_t per_replica =
                    std::int64_t{baseline.tp} * baseline.pp * baseline.cp;
                if (default_gpus->i % per_replica != 0) {
                    fail_at(*node, fmt::format("experiment.baseline: gpus = {} from [defaults] is "
                                               "not a multiple of tp*pp*cp = {}",
                                               default_gpus->i, per_replica));
                }
                baseline.dp = static_cast<int>(default_gpus->i / per_replica);
            }
            experiment.baseline = baseline;
        }
    }
    if (const toml::table* t = optional_table(root, "objectives")) {
        parse_objectives(*t, experiment);
    }
    detail::check_experiment(root, experiment);
    return experiment;
}

prism::Experiment load_experiment(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        throw ConfigError(fmt::format("{}: no such experiment file", path.string()));
    }
    if (std::filesystem::is_directory(path, ec)) {
        throw ConfigError(fmt::format("{}: is a directory, not an experiment file", path.string()));
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw ConfigError(fmt::format("{}: cannot open the experiment file", path.string()));
    }
    // Read with a limit: a device or a huge file (/dev/zero, a result file) stops at once.
    std::string text(kMaxExperimentFileBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    if (in.bad()) {
        throw ConfigError(fmt::format("{}: cannot read the experiment file", path.string()));
    }
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxExperimentFileBytes) {
        throw ConfigError(
            fmt::format("{}: larger than {} bytes: an experiment file is a page "
                        "of settings (is it the right file?)",
                        path.string(), kMaxExperimentFileBytes));
    }
    return parse_experiment(text, path.string());
}

std::string metric_suggestion(const std::string& name, const prism::MetricSchema& schema) {
    const std::string renamed = renamed_metric(name);
    if (!renamed.empty() && find_metric(schema, renamed) >= 0) {
        return fmt::format("; renamed '{}' (prism metrics lists them)", renamed);
    }
    std::vector<std::string> names;
    for (const MetricInfo& info : schema) names.push_back(info.name);
    return did_you_mean(name, names);
}

prism::DesignPoint parse_point_assignments(const prism::Experiment& experiment,
                                           std::string_view text) {
    const toml::table table = parse_toml(detail::point_assignments_as_toml(text), "--point");
    DesignPoint point = experiment.defaults;
    apply_point_table(experiment, table, "point", point);
    if (table.get("sequence_parallel") == nullptr) resolve_point_defaults(experiment, point);
    return point;
}

}  // namespace prism::io
