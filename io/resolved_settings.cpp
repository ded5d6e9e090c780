#include "io/resolved_settings.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "io/detail/toml_reader.hpp"
#include "src/model/design_space.hpp"
#include "src/model/memory.hpp"

namespace prism::io {

namespace {

std::string flag(bool value) { return value ? "true" : "false"; }

std::string mib(double bytes) { return fmt::format("{:g} MiB", bytes / (1024.0 * 1024.0)); }

/// Why flash_attention is what the loader made it.
std::string flash_why(const Experiment& e) {
    std::vector<std::string> without;
    for (const HardwareSpec& hw : e.hardware) {
        if (!(hw.gpu.attention_efficiency > 0)) without.push_back(hw.name);
    }
    if (without.empty())
        return "fused attention: every GPU has a fitted fused-attention efficiency";
    return fmt::format(
        "unfused: [hardware.{}] has no fused-attention efficiency (attention_"
        "efficiency; the A100 preset's published runs are unfused)",
        without.front());
}

}  // namespace

std::vector<ResolvedSetting> resolved_settings(const Experiment& e) {
    const toml::table root = detail::parse_toml(e.text, e.file);
    std::vector<ResolvedSetting> out;
    const auto add = [&](const std::string& table, const std::string& key, std::string value,
                         std::string why = {}) {
        const bool given = static_cast<bool>(root[table][key]);
        out.push_back({table + "." + key, std::move(value), !given, given ? "" : std::move(why)});
    };
    const TrainingSpec& t = e.training;
    add("training", "precision", t.precision == Precision::fp8 ? "\"fp8\"" : "\"bf16\"");
    add("training", "flash_attention", flag(t.flash_attention), flash_why(e));
    add("training", "overlap_grad_reduce", flag(t.overlap_grad_reduce),
        "Megatron --overlap-grad-reduce");
    add("training", "overlap_param_gather", flag(t.overlap_param_gather),
        "Megatron --overlap-param-gather");
    add("training", "tp_comm_overlap", flag(t.tp_comm_overlap),
        "off: needs TransformerEngine userbuffers");
    add("training", "fsdp_prefetch", flag(t.fsdp_prefetch), "PyTorch FSDP prefetch");
    add("training", "fsdp_pp_unsharded", flag(t.fsdp_pp_unsharded),
        "FSDP2 under PP: gathered for the step, one reduce-scatter (torchtitan)");
    add("training", "blocking_p2p", flag(t.blocking_p2p),
        "pipeline sends on the compute stream, split over TP (DeepSpeed)");
    add("training", "bf16_optimizer", flag(t.bf16_optimizer),
        "bf16 gradients added into fp32 after each microbatch (DeepSpeed's BF16_Optimizer)");
    add("training", "grad_reduce_every_microbatch", flag(t.grad_reduce_every_microbatch),
        "ZeRO-2 gradients reduce-scattered in every microbatch's backward (DeepSpeed, FSDP1)");
    add("training", "param_gather_every_microbatch", flag(t.param_gather_every_microbatch),
        "ZeRO-2 parameters gathered in every microbatch's forward (FSDP1 SHARD_GRAD_OP)");
    add("training", "fsdp_ends",
        t.fsdp_ends == TrainingSpec::FsdpEnds::root   ? "\"root\""
        : t.fsdp_ends == TrainingSpec::FsdpEnds::kept ? "\"kept\""
                                                      : "\"units\"",
        "ZeRO-3's embedding / output layer: units of their own, the root's, or kept gathered");
    add("training", "reduce_bucket_size", fmt::format("{:g}", t.reduce_bucket_elements),
        "elements of DeepSpeed's ZeRO 1-3 gradient bucket (0: none)");
    add("training", "fp8_params", flag(t.fp8_params));
    add("training", "grad_reduce_in_fp32", flag(t.grad_reduce_in_fp32),
        "fp32 gradient buffer, Megatron-LM's default with bf16");
    add("training", "pure_bf16", flag(t.pure_bf16),
        "fp32 master weights and Adam moments, fp32 logits for the loss (amp)");
    add("training", "dropout", flag(t.dropout),
        "dropout masks stored (p > 0); false for p = 0 (Llama 3, Nemotron-4 recipes)");

    for (const HardwareSpec& hw : e.hardware) {
        const bool given = static_cast<bool>(root["hardware"][hw.name]["nvlink_domain"]);
        out.push_back({"hardware." + hw.name + ".nvlink_domain",
                       std::to_string(hw.nvlink_domain_gpus()), !given,
                       given                  ? ""
                       : hw.nvlink_domain > 0 ? "the GPU preset's NVLink domain"
                                              : "one node (gpus_per_node)"});
    }

    // the design point's dimensions that no [space] list varies
    const DesignPoint& p = e.defaults;
    const auto in_space = [&](const char* name) {
        return std::any_of(e.space.dimensions.begin(), e.space.dimensions.end(),
                           [&](const Dimension& d) { return d.name == name; });
    };
    const auto dimension = [&](const char* name, std::string value, std::string why = {}) {
        if (!in_space(name)) add("defaults", name, std::move(value), std::move(why));
    };
    dimension("tp", std::to_string(p.tp));
    dimension("pp", std::to_string(p.pp));
    if (!in_space("gpus")) dimension("dp", std::to_string(p.dp));
    dimension("cp", std::to_string(p.cp));
    dimension("microbatch", std::to_string(p.microbatch));
    dimension("zero_stage", std::to_string(p.zero_stage));
    dimension("recompute", "\"" + recompute_name(p.recompute) + "\"");
    dimension("sequence_parallel",
              e.sequence_parallel_follows_tp ? "tp > 1" : flag(p.sequence_parallel),
              "on wherever tp > 1, as Megatron-LM's and NeMo's recipes run TP");
    dimension("interleave", std::to_string(p.interleave));
    const bool selective = p.recompute == Recompute::selective || in_space("recompute");
    if (selective) {
        // what "selective" means: Megatron-Core's modules or torchtitan's op policy
        add("training", "selective_recompute",
            t.torchtitan_op_sac() ? "\"torchtitan-op\"" : "\"megatron\"",
            t.torchtitan_op_sac()
                ? "the stack's: torchtitan's op-level selective checkpointing under "
                  "torch.compile (docs/torchtitan_sac.md)"
                : "Megatron-Core's recompute_modules (docs/recompute_modules.md)");
    }
    if (selective && !t.torchtitan_op_sac()) {
        // what a selective point recomputes (docs/recompute_modules.md)
        const TrainingSpec::RecomputeModules& rm = t.recompute_modules;
        std::vector<std::string> names;
        const std::pair<bool, const char*> modules[] = {{rm.core_attn, "core_attn"},
                                                        {rm.moe_act, "moe_act"},
                                                        {rm.layernorm, "layernorm"},
                                                        {rm.mla_up_proj, "mla_up_proj"},
                                                        {rm.mlp, "mlp"},
                                                        {rm.moe, "moe"},
                                                        {rm.shared_experts, "shared_experts"}};
        for (const auto& [on, name] : modules) {
            if (on) names.push_back(fmt::format("\"{}\"", name));
        }
        add("training", "recompute_modules", fmt::format("[{}]", fmt::join(names, ", ")),
            "Megatron-Core's default for selective recomputation: the attention core");
    }
    if (e.model.is_moe()) {
        dimension("ep", std::to_string(p.ep));
        dimension("etp", std::to_string(p.etp));
    }

    if (!e.space.dimensions.empty()) {
        std::string names;
        for (const auto& s : e.space.scenarios) names += (names.empty() ? "\"" : ", \"") + s + "\"";
        add("space", "scenarios", "[" + names + "]",
            e.space.scenarios.empty()
                ? "no scenario dimension: one front over the whole space"
                : "b_noise describes the world, not a choice: one front per value");
    }

    add("constraints", "max_memory_fraction",
        fmt::format("{:g}", e.constraints.max_memory_fraction),
        "the rest left to the allocator's fragmentation (published runs reach 0.958)");
    const MemoryReserveSpec& r = e.memory_reserve;
    add("memory", "cuda_context", mib(r.cuda_context_bytes), "CUDA context and loaded kernels");
    add("memory", "workspace", mib(r.workspace_bytes), "cuBLAS and TransformerEngine workspaces");
    add("memory", "nccl_per_communicator", mib(r.nccl_bytes_per_communicator),
        "16 connections x (4 MiB Simple + 4.69 MiB LL128 + 0.5 MiB LL), NCCL's defaults");

    const EvaluationSpec& v = e.evaluation;
    add("evaluation", "method", v.method == Method::analytic ? "\"analytic\"" : "\"montecarlo\"");
    if (v.method == Method::analytic) {
        add("evaluation", "grid_points", std::to_string(v.grid_points));
        add("evaluation", "prune", flag(v.prune),
            v.prune ? "skip the stochastic evaluation of points whose bounds are dominated"
                    : "off with scenario dimensions: the robust pick needs every configuration "
                      "in every scenario");
    } else {
        add("evaluation", "samples", std::to_string(v.samples));
    }
    add("evaluation", "sensitivity", flag(v.sensitivity));
    if (e.model.is_moe()) {
        add("evaluation", "routing_share", flag(v.routing_share),
            e.training.moe_force_balance
                ? "the router is forced to balance: the shares are 0 and cost nothing"
                : "one more step-time distribution per point with a routing law: the same point "
                  "with moe_force_balance = true");
    }
    if (e.cotune.enabled && e.cotune.lr_rule == LrRule::deepseek) {
        const double x = e.cotune.lr_batch_exponent;
        add("cotune", "lr_batch_scaling",
            x == 0.5   ? "\"sqrt\""
            : x == 1.0 ? "\"linear\""
                       : "\"none\"",
            "square root around the rule's (lr_opt, B_opt): Adam's scaling (Malladi et al. 2022)");
    }
    return out;
}

}  // namespace prism::io
