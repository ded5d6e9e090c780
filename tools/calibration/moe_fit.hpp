#pragma once

// The MoE calibration of prism_calibrate (`prism_calibrate moe`; docs/moe_calibration.md):
// NVIDIA Megatron-Bridge's MoE performance rows (tests/data/reference/moe/
// megatron_bridge_moe.csv) on each GPU preset's kernel ceilings and the megatron-core stack's
// dense factors, both held; fitted are the MoE-specific factors of the stack only: the token
// dispatch / combine efficiency per link level (NVLink, NIC) on top of the DeepEP-anchored a2a
// ceilings of the GPU presets, the grouped expert GEMMs' factor on the GEMM curve, and the
// router / permute kernels' factor on the HBM efficiency. Reported with each model and each GPU
// left out. Header-only, shared by prism_calibrate and tests/calibration.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tools/calibration/reference_data.hpp"
#include "tools/calibration/stack_fit.hpp"

namespace prism::calibration {

/// One Megatron-Bridge MoE row in the terms of the experiment file.
struct MoeCase {
    std::string label;
    std::string model;         ///< table name (DeepSeekV3, Qwen3_235B_a22B, Qwen3_30B_a3B)
    std::string model_preset;  ///< configs/presets/models
    std::string gpu;           ///< table name (H100, B200, ...)
    std::string gpu_preset;    ///< configs/presets/gpus
    std::string container;
    std::string precision = "fp8";
    std::string dispatcher = "alltoall";
    /// Megatron's EP a2a overlap (overlap_moe_expert_parallel_comm) of the row's recipe; rows
    /// whose recipe was not established ("unknown") are modelled with it, as Megatron's MoE
    /// performance guide recommends.
    bool a2a_overlap = true;
    int gpus = 0, tp = 1, pp = 1, cp = 1, vp = 1, ep = 1, mbs = 1;
    std::int64_t gbs = 0;
    bool calibration_set = false;  ///< fitted (else checked only)
    double measured = 0;           ///< step time (s)
    /// the table's throughput and its "Model TFLOP/sec/GPU" (their ratio: the FLOPs per token
    /// Megatron-Core's num_floating_point_operations counts)
    double tokens_per_s_per_gpu = 0, tflops_per_gpu = 0;
    /// Megatron-Core's recompute_modules of the row's recipe (selective recomputation), e.g.
    /// {"mla_up_proj", "mlp"}; empty: no recomputation (the csv's "none", and "unknown" where
    /// the row's recipe was not established: modelled without recomputation).
    std::vector<std::string> recompute_modules;
};

/// Megatron-Bridge's MoE performance tables (tests/data/reference/moe/megatron_bridge_moe.csv,
/// README there): every "main" row of NeMo containers 25.09-26.08. The calibration set is one
/// software version, container 26.04.01 (the newest that covers every model and GPU), and the
/// only DeepSeek-V3 H100 row (25.09); the other containers' rows are checked, never fitted.
inline std::vector<MoeCase> megatron_bridge_moe(const std::string& data_dir) {
    const Table t = read_table(data_dir + "/reference/moe/megatron_bridge_moe.csv");
    std::vector<MoeCase> out;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        MoeCase c;
        c.model = t.text(i, "model");
        c.model_preset = t.text(i, "model_preset");
        c.gpu = t.text(i, "gpu");
        c.gpu_preset = t.text(i, "gpu_preset");
        c.container = t.text(i, "container");
        c.precision = t.text(i, "precision");
        c.dispatcher = t.text(i, "dispatcher");
        c.a2a_overlap = t.text(i, "moe_a2a_overlap") != "0";
        c.gpus = int(t.number(i, "gpus"));
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.cp = int(t.number(i, "cp"));
        c.vp = int(t.number(i, "vp"));
        c.ep = int(t.number(i, "ep"));
        c.mbs = int(t.number(i, "mbs"));
        c.gbs = std::int64_t(t.number(i, "gbs"));
        c.calibration_set = t.number(i, "calibration_set") != 0;
        c.measured = t.number(i, "step_time_s");
        c.tokens_per_s_per_gpu = t.number(i, "tokens_per_s_per_gpu");
        c.tflops_per_gpu = t.number(i, "tflops_per_gpu");
        const std::string modules = t.text(i, "recompute_modules");  // ';'-separated
        if (modules != "none" && modules != "unknown") {
            std::size_t from = 0;
            while (from <= modules.size()) {
                const std::size_t to = std::min(modules.find(';', from), modules.size());
                c.recompute_modules.push_back(modules.substr(from, to - from));
                from = to + 1;
            }
        }
        c.label = fmt::format("{} {} {} x{} tp{} pp{} vp{} ep{} mb{} gbs{}", c.container, c.model,
                              c.gpu, c.gpus, c.tp, c.pp, c.vp, c.ep, c.mbs, c.gbs);
        out.push_back(c);
    }
    return out;
}

/// The pipeline split of a row. Qwen3-235B's 94 layers: Megatron's embedding and loss slots
/// (96 = 94 + 2 share every pp x vp the tables use). Qwen3-30B's 48: even. DeepSeek-V3's 61:
/// Megatron-Bridge's layouts (`pipeline_model_parallel_layout` of its DeepSeek-V3 recipe and
/// performance configs, e.g. "Et*4|(t*4|)*14tmL" at pp x vp = 16, "Et|(tt|)*30mL" at 32): pp x
/// vp virtual stages of 64 / (pp vp) slots, the last one's 3 slots taken by the MTP layer and
/// the loss ([8] x 7 + [5] at 8 virtual stages, [4] x 15 + [1] at 16) or, at 2 slots, the
/// embedding and the MTP + loss taking a whole slot each ([1] + [2] x 30 + [0] at 32);
/// interleaved as the row runs. The MTP layer itself is not modelled (the model preset).
inline std::string moe_split(const MoeCase& c, int* interleave) {
    *interleave = 1;
    if (c.pp <= 1) return "";
    if (c.model_preset == "deepseek-v3") {
        const int n = c.pp * c.vp, per = 64 / n;
        std::vector<int> layout;
        if (64 % n == 0 && per >= 4) {
            layout.assign(std::size_t(n), per);
            layout.back() = per - 3;
        } else if (64 % n == 0 && per == 2) {
            layout.assign(std::size_t(n), 2);
            layout.front() = 1;
            layout.back() = 0;
        }
        if (!layout.empty()) {
            *interleave = c.vp;
            return fmt::format("layers_per_chunk = [{}]\n", fmt::join(layout, ", "));
        }
        // no recipe layout: the stages as even as they go, lighter first, as 1F1B
        const int layers = 61;
        std::string list;
        for (int s = 0; s < c.pp; ++s) {
            const int k = layers / c.pp + (s >= c.pp - layers % c.pp ? 1 : 0);
            list += fmt::format("{}{}", s == 0 ? "" : ", ", k);
        }
        return fmt::format("layers_per_stage = [{}]\n", list);
    }
    *interleave = c.vp;
    if (c.model_preset == "qwen3-235b-a22b") {
        return "account_for_embedding_in_pipeline_split = true\n"
               "account_for_loss_in_pipeline_split = true\n";
    }
    return "";
}

/// The experiment of a row: the model and GPU presets, the megatron-core stack (with
/// `ceilings`: its MoE factors 1, the fit sets them), FP8 or BF16, TransformerEngine's fused
/// attention, the distributed optimizer, bf16 gradient reduction and no dropout (the recipes'
/// `grad_reduce_in_fp32 = False` in Megatron-Bridge's set_{deepseek_v3,qwen3}_common_configs,
/// `hidden_dropout = 0.0` in its DeepSeek-V3 / Qwen3-MoE bridges, attention_dropout 0.0 from the
/// models' Hugging Face configs), the row's dispatcher (NCCL `alltoall`, or the flex
/// dispatcher's backend, `deepep` / `hybridep`) and Megatron's EP a2a overlap with another
/// microbatch's compute as the row's recipe sets them (the csv's `dispatcher` and
/// `moe_a2a_overlap`), sequence parallelism with TP, the recipe's selective recomputation of
/// modules
/// (`recompute_modules`; none where it has none), the router forced to balance (as
/// the tables are measured), Megatron-Core's rank order (tp, cp, dp, pp: an EP group fills a
/// node or NVLink domain first).
inline Experiment make_moe_experiment(const MoeCase& c, bool ceilings) {
    int interleave = 1;
    const std::string split = moe_split(c, &interleave);
    const std::string stack =
        ceilings ? "a2a_nvlink_efficiency = 1\na2a_nic_efficiency = 1\ngrouped_gemm_efficiency = "
                   "1\npermute_efficiency = 1\n"
                 : "";
    std::string recompute;
    if (!c.recompute_modules.empty()) {
        std::vector<std::string> quoted;
        for (const std::string& m : c.recompute_modules) quoted.push_back("\"" + m + "\"");
        recompute = fmt::format("recompute_modules = [{}]\n", fmt::join(quoted, ", "));
    }
    const std::string text = fmt::format(
        "[model]\npreset = \"{}\"\n\n[training]\nglobal_batch = {}\nprecision = \"{}\"\n"
        "flash_attention = true\ngrad_reduce_in_fp32 = false\ndropout = false\n"
        "moe_dispatcher = \"{}\"\nmoe_a2a_overlap = {}\n{}{}\n"
        "[stack]\npreset = \"megatron-core\"\n{}\n[hardware.gpu]\npreset = \"{}\"\n\n"
        "[defaults]\ngpus = {}\ntp = {}\npp = {}\ncp = {}\nep = {}\nmicrobatch = {}\n"
        "interleave = {}\nzero_stage = 1\nsequence_parallel = {}\nplacement = \"tp-cp-dp-pp\"\n"
        "recompute = \"{}\"\n",
        c.model_preset, c.gbs, c.precision, c.dispatcher, c.a2a_overlap, recompute, split, stack,
        c.gpu_preset, c.gpus, c.tp, c.pp, c.cp, c.ep, c.mbs, interleave,
        c.tp > 1 ? "true" : "false", recompute.empty() ? "none" : "selective");
    return io::parse_experiment(text, c.label);
}

/// The fitted MoE factors of the megatron-core stack (configs/presets/stacks keys). `wave` is
/// 1 / grouped_gemm_wave_experts (a fraction like the others; 0 = all local experts).
struct MoeFactors {
    double a2a_nvlink = 1, a2a_nic = 1, grouped_gemm = 1, permute = 1, wave = 0;
};

inline constexpr int kMoeParams = 5;
inline constexpr const char* kMoeKeys[] = {"a2a_nvlink_efficiency", "a2a_nic_efficiency",
                                           "grouped_gemm_efficiency", "permute_efficiency",
                                           "grouped_gemm_wave_experts"};

inline double& moe_field(MoeFactors& f, int i) {
    return i == 0   ? f.a2a_nvlink
           : i == 1 ? f.a2a_nic
           : i == 2 ? f.grouped_gemm
           : i == 3 ? f.permute
                    : f.wave;
}

/// The factors the shipped fit frees (kMoeKeys order): the NIC a2a factor, the grouped GEMM's
/// factor and wave. The NVLink a2a factor is held at 1 (DeepEP's kernel figure): with
/// Megatron's EP a2a overlap every row hides its NVLink dispatch, so the rows cannot tell it
/// (free, it wanders from 0.25 to 1 between the folds). The permute factor is held at 1 (the
/// router, permute and unpermute kernels at the HBM ceiling): with the wave it is not needed
/// (docs/moe_calibration.md).
inline constexpr const char* kMoeFree = "01101";

/// grouped_gemm_wave_experts of `f` (0: all local experts).
inline double wave_experts(const MoeFactors& f) { return f.wave > 0 ? 1.0 / f.wave : 0.0; }

struct MoeItem {
    MoeCase c;
    Experiment e;
    HardwareSpec ceiling;  ///< the GPU's a2a ceilings, the MoE factors 1
};

inline void set_moe_factors(MoeItem& it, const MoeFactors& f) {
    HardwareSpec& hw = it.e.hardware.at(0);
    const HardwareSpec& c = it.ceiling;
    hw.a2a_nvlink_efficiency = std::min(1.0, c.a2a_nvlink_efficiency * f.a2a_nvlink);
    hw.deepep_nvlink_efficiency = std::min(1.0, c.deepep_nvlink_efficiency * f.a2a_nvlink);
    hw.hybridep_nvlink_efficiency = std::min(1.0, c.hybridep_nvlink_efficiency * f.a2a_nvlink);
    hw.a2a_nic_efficiency = std::min(1.0, c.a2a_nic_efficiency * f.a2a_nic);
    hw.grouped_gemm_factor = f.grouped_gemm;
    hw.permute_factor = f.permute;
    hw.grouped_gemm_wave_experts = wave_experts(f);
}

inline double moe_predict(MoeItem& it) {
    return evaluate_deterministic(it.e, it.e.defaults).step_time_s;
}

inline std::vector<MoeItem> load_moe_items(const std::vector<MoeCase>& cases) {
    std::vector<MoeItem> items;
    for (const MoeCase& c : cases) {
        Experiment e = make_moe_experiment(c, true);
        HardwareSpec ceiling = e.hardware.at(0);
        items.push_back({c, std::move(e), std::move(ceiling)});
    }
    return items;
}

/// Fits the MoE factors on `rows` (Nelder-Mead on the mean squared log error, each row weighted
/// equally; each factor a logistic in (0, 1)), from `start`, with a small tie-breaker toward
/// `start` (`prior` per squared log ratio, kPrior as in the stack fit) for the efficiency
/// factors the rows cannot tell apart. The wave (1 / grouped_gemm_wave_experts) has no
/// tie-breaker and is started from 1 / {1.5, 3, 6, 12, 24} in turn (its objective has several
/// minima), the best kept. `free` (else PRISM_MOE_FREE, else kMoeFree; e.g. "01110") holds
/// the factors marked 0 at `start` (the wave at 0 = all local experts when held).
inline MoeFactors fit_moe(std::vector<MoeItem*>& rows, MoeFactors start, int iterations = 160,
                          double prior = kPrior, const char* free = nullptr) {
    constexpr int n = kMoeParams;
    const char* env = std::getenv("PRISM_MOE_FREE");
    const char* mask = free != nullptr ? free : env != nullptr ? env : kMoeFree;
    auto is_free = [&](int i) {
        return mask == nullptr || int(std::strlen(mask)) <= i || mask[i] == '1';
    };
    auto decode = [&](const Values& x) {
        MoeFactors f = start;
        for (int i = 0; i < n; ++i) {
            if (is_free(i)) moe_field(f, i) = logistic(x[std::size_t(i)]);
        }
        return f;
    };
    auto objective = [&](const Values& x) {
        MoeFactors f = decode(x);
        double sum = 0;
        for (MoeItem* it : rows) {
            set_moe_factors(*it, f);
            const double d = std::log(moe_predict(*it) / it->c.measured);
            sum += d * d;
        }
        double penalty = 0;
        for (int i = 0; i < n - 1; ++i) {
            const double r = std::log(moe_field(f, i) / moe_field(start, i));
            penalty += prior * r * r;
        }
        return sum / double(std::max<std::size_t>(rows.size(), 1)) + penalty;
    };
    Values best;
    double best_value = 0;
    const std::vector<double> waves =
        is_free(n - 1) ? std::vector<double>{1.5, 3, 6, 12, 24} : std::vector<double>{0};
    for (double wave : waves) {
        Values x;
        for (int i = 0; i < n - 1; ++i) {
            x.push_back(logit(std::clamp(moe_field(start, i), 1e-3, 0.98)));
        }
        x.push_back(logit(std::clamp(wave > 0 ? 1.0 / wave : start.wave, 1e-3, 0.98)));
        for (int restart = 0; restart < 3; ++restart)
            x = nelder_mead(objective, x, 0.5, iterations);
        const double value = objective(x);
        if (best.empty() || value < best_value) best = x, best_value = value;
    }
    return decode(best);
}

/// Mean and largest absolute error of `rows` with `f`; `verbose` prints every row.
inline ErrorStats moe_errors(std::vector<MoeItem*>& rows, const MoeFactors& f,
                             bool verbose = false) {
    ErrorStats s;
    for (MoeItem* it : rows) {
        set_moe_factors(*it, f);
        const double pred = moe_predict(*it);
        const double err = relative_error(pred, it->c.measured);
        s.add(err);
        if (verbose) {
            fmt::print("  {:<58} measured {:7.3f} predicted {:7.3f} {:+6.1f}%\n", it->c.label,
                       it->c.measured, pred, 100 * err);
        }
    }
    s.finish();
    return s;
}

}  // namespace prism::calibration
