// prism_calibrate: fits the software stacks (configs/presets/stacks) on the published
// measurements of tests/data/reference, with the GPUs' kernel ceilings (configs/presets/gpus)
// held, and checks every source when it is left out (docs/calibration.md).
//
//   prism_calibrate fit [DATA_DIR]    fits every stack on all sources; prints each stack's
//                                     factors as preset lines and every source's error
//   prism_calibrate loso [DATA_DIR]   leave-one-source-out: for every source, fits on all the
//                                     others and prints that source's error (a markdown table)
//   prism_calibrate moe [DATA_DIR]    the MoE factors of the megatron-core stack on Megatron-
//                                     Bridge's MoE rows, with each model and each GPU left out
//                                     (tools/calibration/moe_fit.hpp; docs/moe_calibration.md)
//   prism_calibrate memory [DATA_DIR] torchtitan's published peak memory per GPU against
//                                     prism's, each row (docs/torchtitan_sac.md; never fitted)
//   prism_calibrate scaling [DATA_DIR] per source, the step's growth with the GPU count beyond
//                                     the fitted model's: the per-doubling gap of the rows that
//                                     differ only in GPUs and batch (scaling_gap.hpp);
//                                     PRISM_CALIBRATE_STALLS=f[,ms] adds stalls' mean to every
//                                     row, PRISM_CALIBRATE_STALL_FIT=SOURCE fits f on a source
//   prism_calibrate check FILE.csv    a table that is never fitted (e.g. a kept-aside set kept
//                                     outside the repository), with the shipped presets;
//                                     PRISM_CALIBRATE_BF16_GRADS=1: its gradients reduced in bf16
//   PRISM_CALIBRATE_ROWS=1            also prints every row
//   PRISM_CALIBRATE_LEAVE_OUT=SOURCE  `fit` without that source (its row of `loso`, with the
//                                     factors it was predicted with)
//   PRISM_CALIBRATE_SHRINK=1          `fit` / `loso` with the stacks' fractions shrunk toward
//                                     megatron-core's (not the shipped fit; docs/calibration.md)
//   PRISM_MOE_FACTORS=a,b,c,d,w       `moe` without a fit: the rows with these factors (a2a
//                                     NVLink, NIC, grouped GEMM, permute, wave experts)
//
// A source is one team's table for one software version (tools/calibration/sources.hpp). Each
// row's hardware is its GPU preset's kernel ceilings times its stack's factors (gemm, fp8 gemm,
// attention, HBM, collectives) plus the stack's host time per kernel, as the experiment loader
// builds it. Each stack is fitted (Nelder-Mead on the mean squared log error, each source of the
// stack weighted equally) on its own rows only; the factors a stack's rows do not constrain are
// megatron-core's (fitted first), and among fits its rows cannot tell apart it takes the one
// nearest megatron-core's (a small penalty on the log ratios, kPrior; PRISM_CALIBRATE_SHRINK=1
// shrinks the fractions toward megatron-core's instead, a measured alternative); deepspeed's host
// time per kernel starts from, and is drawn toward, a measured one (kEagerHostTime_s). A stack
// with no rows left (its only source left out) takes all of megatron-core's factors (deepspeed's
// host time the measured one): the prediction a user would get for a stack never measured. vTrain's
// 1440 rows enter the fit every 4th (cost); every row is reported.
//
// DATA_DIR defaults to the source tree's tests/data.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "src/stochastic/detail/hiccup.hpp"
#include "tools/calibration/moe_fit.hpp"
#include "tools/calibration/scaling_gap.hpp"
#include "tools/calibration/stack_fit.hpp"
#include "tools/calibration/torchtitan_memory.hpp"

namespace {

using namespace prism;
using namespace prism::calibration;

void print_factors(const std::map<std::string, Factors>& f) {
    for (const auto& [stack, keys] : kStackKeys) {
        fmt::print("[{}]\n", stack);
        Factors v = f.at(stack);
        for (Key k : {Key::gemm, Key::fp8_gemm, Key::attention, Key::hbm, Key::collective}) {
            const bool fitted = std::find(keys.begin(), keys.end(), k) != keys.end();
            fmt::print("{} = {:.4f}{}\n", key_name(k), field(v, k),
                       fitted ? "" : "  # megatron-core's");
        }
        if (v.collective_nic >= 0) {
            fmt::print("collective_nic_efficiency = {:.4f}  # across NVLink domains\n",
                       v.collective_nic);
        }
        if (v.overlap > 0) {
            fmt::print("overlap_compute_cost = {:.4f}  # held (PRISM_CALIBRATE_OVERLAP_COST)\n",
                       v.overlap);
        }
        const bool fitted = std::find(keys.begin(), keys.end(), Key::kernel_launch) != keys.end();
        fmt::print("kernel_launch = \"{:.2f} us\"{}\n\n", v.kernel_launch_s * 1e6,
                   fitted ? "" : "  # megatron-core's");
    }
}

/// PRISM_CALIBRATE_SHRINK set (to anything): the stacks' fractions shrunk toward megatron-core's
/// (stack_fit.hpp, prior_weight; not the shipped fit).
Shrinkage shrinkage() {
    return std::getenv("PRISM_CALIBRATE_SHRINK") != nullptr ? Shrinkage::on : Shrinkage::off;
}

/// The bound of the acceptance: 8% for the default stack's sources, 10% otherwise.
double bound(const std::string& stack) { return stack == "megatron-core" ? 0.08 : 0.10; }

int run_fit(const std::string& dir) {
    std::vector<Item> fit_items = load_items(dir, 4);
    const char* left_out = std::getenv("PRISM_CALIBRATE_LEAVE_OUT");
    const std::string out = left_out != nullptr ? left_out : "";
    const auto f = fit_all(fit_items, out, shrinkage());
    print_factors(f);
    // the check on the measured gemm_sustained: 1 where it accounts for the stack's Hopper rows
    for (const auto& [stack, r] : hopper_bf16_over_core(fit_items, f, out)) {
        fmt::print("# {}: BF16 GEMM factor {:.4f} of megatron-core's (its BF16 rows on Hopper)\n",
                   stack, r);
    }
    std::vector<Item> items = load_items(dir, 1);
    fmt::print(
        "| source | stack | GPU | rows | MAPE (in sample) | max |\n|---|---|---|---|---|---|\n");
    for (const auto& [name, e] : errors(items, f)) {
        fmt::print("| {} | {} | {} | {} | {:.1f}% | {:.1f}% |\n", name, e.stack, e.gpu, e.s.n,
                   100 * e.s.mean_abs, 100 * e.s.max_abs);
    }
    return 0;
}

int run_loso(const std::string& dir) {
    std::vector<Item> fit_items = load_items(dir, 4);
    std::vector<Item> items = load_items(dir, 1);
    std::set<std::string> sources;
    for (const Item& it : items) sources.insert(it.row.c.set);
    const auto all = fit_all(fit_items, "", shrinkage());
    const auto in_sample = errors(items, all);
    fmt::print(
        "| source left out | stack | GPU | rows | MAPE left out | max | MAPE in sample | bound "
        "| |\n|---|---|---|---|---|---|---|---|---|\n");
    int failures = 0;
    for (const std::string& source : sources) {
        const auto f = fit_all(fit_items, source, shrinkage());
        const SourceError e = errors(items, f, source).at(source);
        // the stack's rows left in the fold (fit_items: what the fit saw) against its keys
        const auto left = std::count_if(fit_items.begin(), fit_items.end(), [&](const Item& it) {
            return it.row.c.stack == e.stack && it.row.c.set != source;
        });
        const auto keys = std::find_if(kStackKeys.begin(), kStackKeys.end(),
                                       [&](const auto& sk) { return sk.first == e.stack; });
        const bool alone = left == 0;
        const bool too_few =
            keys != kStackKeys.end() && std::size_t(left) < fitted_key_count(e.stack, keys->second);
        const bool ok = e.s.mean_abs <= bound(e.stack);
        failures += ok ? 0 : 1;
        fmt::print("| {} | {}{} | {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.0f}% | {} |\n", source,
                   e.stack,
                   e.stack == "megatron-core" ? ""
                   : alone                    ? " (none left: megatron-core's)"
                   : too_few                  ? " (fewer rows left than keys: megatron-core's)"
                                              : "",
                   e.gpu, e.s.n, 100 * e.s.mean_abs, 100 * e.s.max_abs,
                   100 * in_sample.at(source).s.mean_abs, 100 * bound(e.stack), ok ? "ok" : "over");
        std::fflush(stdout);
    }
    fmt::print("\n{} of {} sources over their bound\n", failures, sources.size());
    return 0;
}

/// The rows of one source that share everything but their GPU count, batch and microbatch.
std::string scaling_group(const Case& c) {
    return fmt::format("{} {}x{} h{} s{} {} tp{} pp{} cp{} z{} {} {}", c.gpu, c.layers, c.hidden,
                       c.heads, c.seq, c.precision, c.tp, c.pp, c.cp, c.zero_stage, c.recompute,
                       c.label.substr(0, c.label.find(' ')));
}

/// One row of `scaling`: its group, GPUs, log(measured / predicted step) without stalls, and
/// what stalls would add to its step (the shape of its synchronizations, its step time).
struct ScalingRow {
    std::string source, group;
    int gpus = 1;
    double log_ratio = 0;
    stochastic::detail::StallShape shape;
    double step_s = 0;
};

/// E[W] / step of `r` with stalls of `fraction` and `duration_s` (stall_law).
double stall_share(const ScalingRow& r, double fraction, double duration_s) {
    if (!(fraction > 0)) return 0;
    StallSpec spec;
    spec.fraction = fraction;
    spec.duration_s = duration_s;
    std::vector<double> value, weight;
    stochastic::detail::stall_law(spec, r.shape, r.step_s, value, weight);
    double mean = 0;
    for (std::size_t i = 0; i < value.size(); ++i) mean += value[i] * weight[i];
    return mean / r.step_s;
}

/// The per-doubling gap of every source, each row's prediction with the stalls' mean added.
std::map<std::string, ScalingGap> gaps(const std::vector<ScalingRow>& rows, double fraction,
                                       double duration_s) {
    std::map<std::string, std::vector<ScalingPoint>> by_source;
    for (const ScalingRow& r : rows) {
        by_source[r.source].push_back(
            {r.group, r.gpus, r.log_ratio - std::log1p(stall_share(r, fraction, duration_s))});
    }
    std::map<std::string, ScalingGap> out;
    for (const auto& [source, points] : by_source) out[source] = scaling_gap(points);
    return out;
}

/// Every source's per-doubling gap (scaling_gap.hpp) with the stacks fitted on all sources.
/// PRISM_CALIBRATE_STALLS=f[,ms]: with stalls of that fraction of a node's time (duration 20 ms
/// unless given) added to each row's step, by its mean (StallSpec; docs/tails.md "Stalls");
/// PRISM_CALIBRATE_STALL_FIT=SOURCE: the fraction that zeroes that source's gap, then the table
/// with it (the other sources are predicted).
int run_scaling(const std::string& dir) {
    std::vector<Item> fit_items = load_items(dir, 4);
    std::vector<Item> items = load_items(dir, 1);
    const auto f = fit_all(fit_items, "", shrinkage());
    std::vector<ScalingRow> rows;
    for (Item& it : items) {
        const Case& c = it.row.c;
        set_factors(it, f.at(c.stack));
        const DeterministicResult r = evaluate_deterministic(it.e, it.e.defaults);
        const double pred = predicted_value(r, it.e.defaults, it.row.q);
        // log(measured step / predicted step): TFLOP/s rows invert
        const double lr = it.row.q == Quantity::step_time_s ? std::log(c.measured / pred)
                                                            : std::log(pred / c.measured);
        rows.push_back(
            {c.set, scaling_group(c), c.tp * c.pp * c.cp * c.dp, lr,
             stochastic::detail::stall_shape(r.profile, it.e.defaults, it.e.hardware.at(0)),
             r.step_time_s});
    }
    double fraction = 0, duration_s = 0.02;
    if (const char* v = std::getenv("PRISM_CALIBRATE_STALLS")) {
        fraction = std::atof(v);
        if (const char* comma = std::strchr(v, ',')) duration_s = std::atof(comma + 1) * 1e-3;
        if (!(fraction >= 0 && fraction <= 0.5 && duration_s > 0)) {
            throw ConfigError("PRISM_CALIBRATE_STALLS: a fraction in [0, 0.5][,duration in ms]");
        }
    }
    if (const char* source = std::getenv("PRISM_CALIBRATE_STALL_FIT")) {
        std::vector<ScalingRow> own;  // the bisection needs that source's rows only
        std::copy_if(rows.begin(), rows.end(), std::back_inserter(own),
                     [&](const ScalingRow& r) { return r.source == source; });
        if (own.empty())
            throw ConfigError(std::string("PRISM_CALIBRATE_STALL_FIT: no source ") + source);
        const auto slope = [&](double x) { return gaps(own, x, duration_s).at(source).slope; };
        if (!(slope(0) > 0)) throw ConfigError("PRISM_CALIBRATE_STALL_FIT: no growth to fit");
        double lo = 0, hi = 0.05;
        for (int i = 0; i < 60; ++i) (slope(0.5 * (lo + hi)) > 0 ? lo : hi) = 0.5 * (lo + hi);
        fraction = 0.5 * (lo + hi);
        fmt::print("stall fraction fitted on {}: {:.3g} (stalls of {:.0f} ms)\n\n", source,
                   fraction, duration_s * 1e3);
    }
    const auto without = gaps(rows, 0, duration_s);
    const auto with = gaps(rows, fraction, duration_s);
    fmt::print(
        "| source | groups | rows | GPUs | measured step over predicted, per doubling of the GPUs "
        "|{}\n|---|---|---|---|---|{}\n",
        fraction > 0 ? fmt::format(" with stalls of {:.3g} |", fraction) : "",
        fraction > 0 ? "---|" : "");
    for (const auto& [source, g] : without) {
        if (g.groups == 0) continue;
        const ScalingGap& w = with.at(source);
        fmt::print("| {} | {} | {} | {}-{} | {:+.2f}% +- {:.2f} |{}\n", source, g.groups, g.rows,
                   g.min_gpus, g.max_gpus, 100 * g.per_doubling(), 100 * g.slope_se,
                   fraction > 0 ? fmt::format(" {:+.2f}% +- {:.2f} |", 100 * w.per_doubling(),
                                              100 * w.slope_se)
                                : "");
    }
    return 0;
}

/// torchtitan's published peak memory per GPU (max reserved) against prism's allocator share
/// of each row, selective rows as torchtitan's op-level SAC and as Megatron's selective.
int run_memory(const std::string& dir) {
    fmt::print(
        "| row | AC | published (max reserved) | prism | error | of which state, activations, "
        "temporary | with Megatron's selective | error |\n|---|---|---|---|---|---|---|---|\n");
    for (const TorchtitanMemoryRow& r : torchtitan_memory(dir)) {
        const bool selective = r.recompute == "selective";
        fmt::print(
            "| {} | {} | {:.1f} GiB | {:.1f} GiB | {:+.1f}% | {:.1f}, {:.1f}, {:.1f} GiB | {} "
            "| {} |\n",
            r.label, selective ? "op SAC" : r.recompute, r.measured_gib, r.predicted_gib,
            100 * (r.predicted_gib / r.measured_gib - 1), r.state_gib, r.activations_gib,
            r.temporary_gib, selective ? fmt::format("{:.1f} GiB", r.megatron_gib) : "",
            selective ? fmt::format("{:+.1f}%", 100 * (r.megatron_gib / r.measured_gib - 1)) : "");
    }
    return 0;
}

/// A table never fitted (the kept-aside sets of DEVELOPERS.md stay outside the repository):
/// achieved TFLOP/s per GPU of Megatron-Core GPT runs, one CSV row each (columns label, gpu,
/// stack, layers, hidden, heads, vocab, seq, gpus, global_batch, micro_batch, tp, pp,
/// precision, recompute, tflops_per_gpu), with the shipped presets. Settings of Megatron-Core's
/// performance runs: fused attention, sequence parallelism and --tp-comm-overlap with TP, the
/// distributed optimizer with overlapped gradient reduction and parameter gather, GeLU MLP of
/// 4h, tied embedding.
int run_check(const std::string& path) {
    const Table t = read_table(path);
    ErrorStats all;
    fmt::print("| row | GPUs | measured TFLOP/s | predicted | error |\n|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        Case c;
        c.label = t.text(i, "label");
        c.set = path;
        c.gpu = t.text(i, "gpu");
        c.stack = t.text(i, "stack");
        const int gpus = read_shape_and_batch(t, i, c);
        c.tp = int(t.number(i, "tp"));
        c.pp = int(t.number(i, "pp"));
        c.dp = gpus / (c.tp * c.pp);
        c.zero_stage = 1;
        c.precision = t.text(i, "precision");
        c.recompute = t.text(i, "recompute");
        c.flash_attention = true;
        c.sequence_parallel = c.tp > 1;
        c.tp_comm_overlap = c.tp > 1;
        c.overlap_grad_reduce = true;
        c.overlap_param_gather = true;
        // Megatron-LM's default with bf16: fp32 main gradients, reduced in fp32 (arguments.py);
        // PRISM_CALIBRATE_BF16_GRADS: --grad-reduce-in-bf16 instead
        c.grad_reduce_in_fp32 =
            c.precision == "bf16" && std::getenv("PRISM_CALIBRATE_BF16_GRADS") == nullptr;
        c.measured = t.number(i, "tflops_per_gpu");
        const Experiment e = make_experiment(c);
        const double pred = predict(e, c, Quantity::tflops_per_gpu);
        const double err = relative_error(pred, c.measured);
        all.add(err);
        fmt::print("| {} | {} | {:.1f} | {:.1f} | {:+.1f}% |\n", c.label, gpus, c.measured, pred,
                   100 * err);
    }
    all.finish();
    fmt::print("\nMAPE {:.1f}% (max {:.1f}%) over {} rows\n", 100 * all.mean_abs, 100 * all.max_abs,
               all.n);
    return 0;
}

/// The MoE calibration: fits the megatron-core stack's MoE factors on the calibration set of
/// Megatron-Bridge's MoE rows, prints them as preset lines, then every model and every GPU left
/// out (fitted on the rest, the left-out rows' error), the in-sample errors per group, and the
/// rows of the other containers with the fitted factors (checked, never fitted).
int run_moe(const std::string& dir) {
    const bool verbose = std::getenv("PRISM_CALIBRATE_ROWS") != nullptr;
    std::vector<MoeItem> items = load_moe_items(megatron_bridge_moe(dir));
    std::vector<MoeItem*> fit_rows, other_rows;
    for (MoeItem& it : items) (it.c.calibration_set ? fit_rows : other_rows).push_back(&it);
    if (const char* given = std::getenv("PRISM_MOE_FACTORS")) {
        // the rows with given factors (a2a NVLink, NIC, grouped GEMM, permute, wave experts),
        // no fit: a model change's effect with the factors held
        MoeFactors f;
        double wave = 0;
        if (std::sscanf(given, "%lf,%lf,%lf,%lf,%lf", &f.a2a_nvlink, &f.a2a_nic, &f.grouped_gemm,
                        &f.permute, &wave) != 5) {
            throw ConfigError("PRISM_MOE_FACTORS: five comma-separated numbers");
        }
        f.wave = wave > 0 ? 1.0 / wave : 0.0;
        const ErrorStats held = moe_errors(fit_rows, f, true);
        fmt::print("MAPE {:.1f}% (max {:.1f}%) with the given factors\n", 100 * held.mean_abs,
                   100 * held.max_abs);
        return 0;
    }
    const MoeFactors all = fit_moe(fit_rows, MoeFactors{});
    fmt::print("[stack megatron-core: MoE factors, {} rows]\n", fit_rows.size());
    MoeFactors shown = all;
    for (int i = 0; i < kMoeParams - 1; ++i) {
        fmt::print("{} = {:.4f}\n", kMoeKeys[i], moe_field(shown, i));
    }
    fmt::print("{} = {:.3f}\n", kMoeKeys[kMoeParams - 1], wave_experts(shown));
    fmt::print("\nin sample (all {} rows):\n", fit_rows.size());
    const ErrorStats in = moe_errors(fit_rows, all, true);
    fmt::print("MAPE {:.1f}% (max {:.1f}%)\n\n", 100 * in.mean_abs, 100 * in.max_abs);
    // every row ran: does it fit the GPU in prism, with its recipe's recompute_modules and
    // without recomputation (the most loaded stage; usable = capacity x max_memory_fraction)?
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    fmt::print(
        "| row (recompute_modules) | memory, recipe's modules | without recomputation | usable "
        "| step, recipe's modules | without |\n|---|---|---|---|---|---|\n");
    for (MoeItem* it : fit_rows) {
        set_moe_factors(*it, all);
        const DeterministicResult with = evaluate_deterministic(it->e, it->e.defaults);
        DesignPoint none = it->e.defaults;
        none.recompute = Recompute::none;
        const DeterministicResult without = evaluate_deterministic(it->e, none);
        const HardwareSpec& hw = it->e.hardware.at(0);
        const double usable = hw.gpu.hbm_bytes * it->e.constraints.max_memory_fraction;
        fmt::print("| {} ({}) | {:.1f} GiB{} | {:.1f} GiB | {:.1f} GiB | {:.3f} s | {:.3f} s |\n",
                   it->c.label,
                   it->c.recompute_modules.empty()
                       ? "none"
                       : fmt::format("{}", fmt::join(it->c.recompute_modules, ", ")),
                   with.memory.total_bytes() / kGiB, with.feasible ? " (fits)" : " (over)",
                   without.memory.total_bytes() / kGiB, usable / kGiB, with.step_time_s,
                   without.step_time_s);
    }
    fmt::print("\n");
    int failures = 0;
    for (const char* by : {"model", "gpu"}) {
        std::set<std::string> groups;
        for (MoeItem* it : fit_rows) groups.insert(by[0] == 'm' ? it->c.model : it->c.gpu);
        fmt::print(
            "| {} left out | rows | MAPE left out | max | MAPE in sample | a2a NVLink | "
            "a2a NIC | grouped GEMM | permute | wave experts | bound | |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            by);
        for (const std::string& g : groups) {
            std::vector<MoeItem*> train, test;
            for (MoeItem* it : fit_rows) {
                ((by[0] == 'm' ? it->c.model : it->c.gpu) == g ? test : train).push_back(it);
            }
            const MoeFactors f = fit_moe(train, MoeFactors{});
            const ErrorStats left = moe_errors(test, f, verbose);
            const ErrorStats inside = moe_errors(test, all);
            const bool ok = left.mean_abs <= 0.10;
            failures += ok ? 0 : 1;
            fmt::print(
                "| {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.3f} | {:.3f} | {:.3f} | {:.3f} "
                "| {:.2f} | 10% | {} |\n",
                g, test.size(), 100 * left.mean_abs, 100 * left.max_abs, 100 * inside.mean_abs,
                f.a2a_nvlink, f.a2a_nic, f.grouped_gemm, f.permute, wave_experts(f),
                ok ? "ok" : "over");
            std::fflush(stdout);
        }
        fmt::print("\n");
    }
    fmt::print("{} left-out groups over the 10% bound\n\n", failures);
    std::map<std::string, std::vector<MoeItem*>> by_container;
    for (MoeItem* it : other_rows) by_container[it->c.container].push_back(it);
    fmt::print(
        "| other container (checked, not fitted) | rows | MAPE | max |\n|---|---|---|---|\n");
    std::vector<MoeItem*> rest;
    for (auto& [name, rows] : by_container) {
        const ErrorStats s = moe_errors(rows, all, verbose);
        fmt::print("| {} | {} | {:.1f}% | {:.1f}% |\n", name, rows.size(), 100 * s.mean_abs,
                   100 * s.max_abs);
        rest.insert(rest.end(), rows.begin(), rows.end());
    }
    const ErrorStats s = moe_errors(rest, all);
    fmt::print("| all other rows | {} | {:.1f}% | {:.1f}% |\n", rest.size(), 100 * s.mean_abs,
               100 * s.max_abs);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string which = argc > 1 ? argv[1] : "loso";
    const std::string dir = argc > 2 ? argv[2] : PRISM_REFERENCE_DATA_DIR;
    try {
        if (which == "fit") return run_fit(dir);
        if (which == "loso") return run_loso(dir);
        if (which == "moe") return run_moe(dir);
        if (which == "memory") return run_memory(dir);
        if (which == "scaling") return run_scaling(dir);
        if (which == "check" && argc > 2) return run_check(argv[2]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "prism_calibrate: %s\n", e.what());
        return 1;
    }
    std::fprintf(
        stderr,
        "prism_calibrate: unknown command '%s' (fit, loso, moe, memory, scaling, check FILE)\n",
        which.c_str());
    return 2;
}
