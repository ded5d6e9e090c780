#pragma once

// The stack fit of prism_calibrate (tools/calibration/prism_calibrate.cpp; docs/calibration.md):
// each row on its GPU preset's kernel ceilings times its stack's factors, each stack fitted on
// its own rows. Header-only, shared by prism_calibrate and tests/calibration.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tools/calibration/sources.hpp"

namespace prism::calibration {

inline double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double logit(double p) { return std::log(p / (1.0 - p)); }

/// A stack's fitted values (configs/presets/stacks keys).
struct Factors {
    double gemm = 0.8, fp8_gemm = 0.9, attention = 0.6, hbm = 0.9, collective = 0.6;
    double kernel_launch_s = 2e-6;
    /// HardwareSpec::overlap_compute_cost, held (not fitted): 0 as the stack presets ship it,
    /// or PRISM_CALIBRATE_OVERLAP_COST (overlap_cost_from_env; docs/calibration.md, "What an
    /// overlapped collective costs the compute beside it").
    double overlap = 0;
    /// The factor on the GPU's collective ceiling across NVLink domains
    /// (HardwareSpec::collective_nic_efficiency); < 0: the stack's collective factor (as the
    /// presets ship it), or PRISM_CALIBRATE_NIC_COLLECTIVE (nic_collective_from_env).
    double collective_nic = -1;
    /// On Hopper, GpuSpec::attention_sustained held over the presets' (1): 1, or
    /// PRISM_CALIBRATE_ATTENTION_SUSTAINED (attention_sustained_from_env; docs/calibration.md,
    /// "Attention at the power limit on Hopper").
    double attention_sustained = 1;
};

/// The GPU presets one die's power limit covers (H100 SXM and H200: GH100 at 700 W; the 2024-12
/// torchtitan rows' 500 W H100s too, their lower clock in their peak): their presets'
/// gemm_sustained is measured (docs/calibration.md, "Sustained BF16 GEMMs on Hopper").
inline bool is_hopper(const std::string& gpu) { return gpu == "h100-sxm" || gpu == "h200"; }

enum class Key { gemm, fp8_gemm, attention, hbm, collective, kernel_launch, collective_nic };
inline const char* key_name(Key k) {
    switch (k) {
        case Key::gemm:
            return "gemm_efficiency";
        case Key::fp8_gemm:
            return "fp8_gemm_efficiency";
        case Key::attention:
            return "attention_efficiency";
        case Key::hbm:
            return "hbm_efficiency";
        case Key::collective:
            return "collective_efficiency";
        case Key::kernel_launch:
            return "kernel_launch";
        case Key::collective_nic:
            return "collective_nic_efficiency";
    }
    return "?";
}
inline double& field(Factors& f, Key k) {
    switch (k) {
        case Key::gemm:
            return f.gemm;
        case Key::fp8_gemm:
            return f.fp8_gemm;
        case Key::attention:
            return f.attention;
        case Key::hbm:
            return f.hbm;
        case Key::collective:
            return f.collective;
        case Key::kernel_launch:
            return f.kernel_launch_s;
        case Key::collective_nic:
            return f.collective_nic;
    }
    return f.gemm;
}

/// What each stack's rows are fitted for (the rest: megatron-core's values).
inline const std::vector<std::pair<std::string, std::vector<Key>>> kStackKeys{
    {"megatron-core",
     {Key::gemm, Key::fp8_gemm, Key::attention, Key::hbm, Key::collective, Key::kernel_launch}},
    // Megatron-DeepSpeed's linear layers are Megatron-LM's: megatron-core's cuBLAS GEMM factor
    {"deepspeed", {Key::hbm, Key::collective, Key::kernel_launch}},
    {"llm-foundry", {Key::gemm, Key::fp8_gemm, Key::attention, Key::hbm, Key::kernel_launch}},
    {"torchtitan", {Key::gemm, Key::fp8_gemm, Key::attention, Key::hbm, Key::collective}},
    {"nemo-mlperf", {Key::fp8_gemm, Key::attention, Key::collective}},
};

/// A row with its experiment on the kernel ceilings (the stack's factors left out).
struct Item {
    SourceRow row;
    Experiment e;
    HardwareSpec ceiling;
};

inline void set_factors(Item& it, const Factors& f) {
    HardwareSpec& hw = it.e.hardware.at(0);
    const HardwareSpec& c = it.ceiling;
    hw.gpu.gemm.max_efficiency = std::min(1.0, c.gpu.gemm.max_efficiency * f.gemm);
    hw.gpu.fp8_gemm_max_efficiency = std::min(1.0, c.gpu.fp8_gemm_max_efficiency * f.fp8_gemm);
    // PRISM_CALIBRATE_ATTENTION_SUSTAINED: Hopper's attention_sustained as if the presets gave it
    const double held = is_hopper(it.row.c.gpu) ? f.attention_sustained : 1.0;
    hw.gpu.attention_efficiency = std::min(1.0, c.gpu.attention_efficiency * f.attention * held);
    hw.gpu.exp_per_s = c.gpu.exp_per_s * f.attention * held;  // the whole kernel, its exponentials
    hw.gpu.hbm_efficiency = std::min(1.0, c.gpu.hbm_efficiency * f.hbm);
    hw.collective_efficiency = std::min(1.0, c.collective_efficiency * f.collective);
    // the ceiling's own (the loader gave it the collective one where the GPU has none)
    hw.collective_nic_efficiency =
        std::min(1.0, c.collective_nic_efficiency *
                          (f.collective_nic < 0 ? f.collective : f.collective_nic));
    hw.kernel_launch_s = c.kernel_launch_s + f.kernel_launch_s;
    hw.overlap_compute_cost = f.overlap;
}

/// PRISM_CALIBRATE_OVERLAP_COST: every stack's overlap_compute_cost held at that value (the
/// experiment of docs/calibration.md); unset: 0, as the presets ship it.
inline double overlap_cost_from_env() {
    const char* v = std::getenv("PRISM_CALIBRATE_OVERLAP_COST");
    if (v == nullptr) return 0.0;
    const double k = std::atof(v);
    if (!(k >= 0 && k < 1)) throw ConfigError("PRISM_CALIBRATE_OVERLAP_COST: a fraction in [0, 1)");
    return k;
}

/// The fraction in (0, 1] that environment variable `name` holds an experiment's value at
/// (docs/calibration.md); `unset` where it is not set.
inline double held_fraction_from_env(const char* name, double unset) {
    const char* v = std::getenv(name);
    if (v == nullptr) return unset;
    const double k = std::atof(v);
    if (!(k > 0 && k <= 1)) throw ConfigError(std::string(name) + ": a fraction in (0, 1]");
    return k;
}

/// PRISM_CALIBRATE_ATTENTION_SUSTAINED: fused attention on the H100 and H200 at that fraction
/// of its ceiling, every stack (the experiment of docs/calibration.md); unset: 1, as the presets
/// ship it.
inline double attention_sustained_from_env() {
    return held_fraction_from_env("PRISM_CALIBRATE_ATTENTION_SUSTAINED", 1.0);
}

/// PRISM_CALIBRATE_NIC_COLLECTIVE: every stack's factor on the collective ceiling across NVLink
/// domains held at that value (the experiment of docs/calibration.md); unset: -1, the stack's
/// collective factor.
inline double nic_collective_from_env() {
    return held_fraction_from_env("PRISM_CALIBRATE_NIC_COLLECTIVE", -1.0);
}

/// Whether PRISM_CALIBRATE_NIC_FREE (a comma-separated list of stacks; the experiment of
/// docs/calibration.md) names `stack`: its collective factor across NVLink domains is then a
/// key of its own; unset: one collective factor for both levels (the presets' fit).
inline bool nic_key_freed(const std::string& stack) {
    const char* v = std::getenv("PRISM_CALIBRATE_NIC_FREE");
    return v != nullptr &&
           (std::string(",") + v + ",").find("," + stack + ",") != std::string::npos;
}

/// `keys`, with the collective factor across NVLink domains added where nic_key_freed(stack),
/// starting from the stack's collective factor.
inline std::vector<Key> with_nic_key(const std::string& stack, const std::vector<Key>& keys,
                                     Factors& start) {
    if (!nic_key_freed(stack)) return keys;
    std::vector<Key> out = keys;
    out.push_back(Key::collective_nic);
    if (start.collective_nic < 0) start.collective_nic = start.collective;
    return out;
}

/// How many keys `fit_all` fits for `stack` (its `keys` and the experiment's): a fold with fewer
/// of the stack's rows left keeps megatron-core's factors.
inline std::size_t fitted_key_count(const std::string& stack, const std::vector<Key>& keys) {
    return keys.size() + (nic_key_freed(stack) ? 1 : 0);
}

inline double predict_item(Item& it) { return predict(it.e, it.row.c, it.row.q); }

inline double log_error(Item& it) { return std::log(predict_item(it) / it.row.c.measured); }

inline std::vector<Item> load_items(const std::string& dir, int vtrain_stride) {
    std::vector<Item> items;
    for (SourceRow& r : all_sources(dir, vtrain_stride)) {
        Experiment e = make_experiment(r.c, "", true);
        HardwareSpec ceiling = e.hardware.at(0);
        items.push_back({std::move(r), std::move(e), std::move(ceiling)});
    }
    return items;
}

using Values = std::vector<double>;

/// Plain Nelder-Mead (Lagarias et al. 1998 coefficients).
template <class F>
inline Values nelder_mead(F f, Values x0, double step, int iterations) {
    const std::size_t n = x0.size();
    std::vector<Values> simplex(n + 1, x0);
    Values value(n + 1);
    for (std::size_t i = 0; i <= n; ++i) {
        if (i > 0) simplex[i][i - 1] += step;
        value[i] = f(simplex[i]);
    }
    for (int it = 0; it < iterations; ++it) {
        std::vector<std::size_t> order(n + 1);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](auto a, auto b) { return value[a] < value[b]; });
        const std::size_t best = order[0], worst = order[n], second = order[n - 1];
        Values centroid(n, 0.0);
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t j = 0; j < n; ++j) centroid[j] += simplex[order[i]][j] / double(n);
        auto along = [&](double t) {
            Values p(n);
            for (std::size_t j = 0; j < n; ++j)
                p[j] = centroid[j] + t * (simplex[worst][j] - centroid[j]);
            return p;
        };
        const Values reflected = along(-1.0);
        const double fr = f(reflected);
        if (fr < value[best]) {
            const Values expanded = along(-2.0);
            const double fe = f(expanded);
            if (fe < fr) {
                simplex[worst] = expanded, value[worst] = fe;
            } else {
                simplex[worst] = reflected, value[worst] = fr;
            }
        } else if (fr < value[second]) {
            simplex[worst] = reflected, value[worst] = fr;
        } else {
            const Values contracted = fr < value[worst] ? along(-0.5) : along(0.5);
            const double fc = f(contracted);
            if (fc < std::min(fr, value[worst])) {
                simplex[worst] = contracted, value[worst] = fc;
            } else {
                for (std::size_t i = 1; i <= n; ++i) {
                    auto& p = simplex[order[i]];
                    for (std::size_t j = 0; j < n; ++j)
                        p[j] = simplex[best][j] + 0.5 * (p[j] - simplex[best][j]);
                    value[order[i]] = f(p);
                }
            }
        }
    }
    return simplex[std::min_element(value.begin(), value.end()) - value.begin()];
}

inline bool is_fraction(Key k) { return k != Key::kernel_launch; }

/// The host time per kernel is fitted as log(t + kHostTimeFloor_s): a stack whose rows do not
/// need host time may reach 0, and a stack starting from 0 (megatron-core's) can still climb to
/// the tens of microseconds its rows need (in log t, 0 was a trap the simplex never left).
inline constexpr double kHostTimeFloor_s = 1e-6;

/// Weight of the tie-breaker toward megatron-core's host time per kernel (and toward every
/// factor without shrinkage): kPrior x the squared log ratio, next to the mean squared log error
/// of the rows (a 10% error on every row costs 0.009). It only decides among fits the rows
/// cannot tell apart: then the stack departs least from megatron-core's.
inline constexpr double kPrior = 1e-4;

/// Shrinkage of a stack's efficiency fractions toward megatron-core's, as a Gaussian prior on
/// their log ratios next to the rows' errors: weight kRowSigma^2 / (S kStackSigma^2) per squared
/// log ratio for a stack fitted on S sources (each source's mean squared log error counts as one
/// observation of variance kRowSigma^2). Both from model 2026.11.28.5's fit, before shrinkage:
/// kRowSigma, the typical in-sample error of one source (RMS log error 0.054: the 18 sources'
/// in-sample MAPE averages 4.3%); kStackSigma, how far stacks' fractions sit from megatron-core's
/// (RMS log ratio 0.19 over the 15 fractions the four other stacks fitted, pooled: three per
/// kernel class are too few for a spread per class, and the BF16 GEMM factors agree by
/// construction, through the shared sustained fraction). Where a stack's rows pin a fraction
/// they outweigh the prior; where they barely tell values apart (vTrain's host-bound rows and
/// the GEMM factor) the stack keeps about megatron-core's. The host time per kernel keeps kPrior:
/// it spans two orders of magnitude across stacks. docs/calibration.md, "Shrinkage toward
/// megatron-core's".
inline constexpr double kRowSigma = 0.054;
inline constexpr double kStackSigma = 0.19;
/// fit_stack / fit_all with or without the shrinkage (without: the tie-breaker kPrior only). Off
/// in the shipped fit (`PRISM_CALIBRATE_SHRINK=1 prism_calibrate ...` turns it on): it brings
/// two more sources within their bound left out (BLOOM 13.2% -> 6.6%, Trainy 10.6% -> ~3%), but
/// it moves nemo-mlperf's attention factor to megatron-core's and the never-fitted Carina GB200
/// median from -4.1% to -7.0% (docs/calibration.md, "Shrinkage toward megatron-core's").
enum class Shrinkage { on, off };

/// Weight per squared log ratio to megatron-core's of fitted key `k` of a stack fitted on
/// `sources` sources.
inline double prior_weight(Key k, std::size_t sources, Shrinkage shrink) {
    if (shrink == Shrinkage::off || !is_fraction(k)) return kPrior;
    return kRowSigma * kRowSigma / (double(sources) * kStackSigma * kStackSigma);
}

/// The host time per kernel of fit_stack's second start (tens of microseconds: eager PyTorch
/// launch costs, the order vTrain's Megatron-DeepSpeed rows need).
inline constexpr double kKernelLaunchStart_s = 50e-6;

/// Where the deepspeed stack's host time per kernel starts, and what its tie-breaker draws it
/// toward (fit_all): a measurement, so that a fold without vTrain's host-bound rows runs at it
/// rather than at megatron-core's ~1 us. Eager PyTorch
/// GPT layers of Megatron's shape (bias linears, unfused causal attention, GeLU, dropout), BF16,
/// small enough that the GPU waits on the host, forward + backward with full recomputation as
/// vTrain's Megatron-DeepSpeed runs (and one without): 2.6-3.7 ms of host time per layer on the
/// Xeon of the H200 machine the project was lent (bench/gpu_host_overhead.py, 2026-11-28;
/// tests/data/reference/h200_eager_host.csv), divided by the kernels the model counts per layer
/// in the same configuration (37 with recomputation, 26 without): the median of the five
/// host-bound runs (`StackFit.DeepspeedHostTimeIsTheMeasuredEagerLayerOverTheModelsKernels`).
/// The host is not vTrain's (a DGX A100's EPYC 7742); vTrain's rows fit 87.8 us from it.
inline constexpr double kEagerHostTime_s = 97.6e-6;

/// How much lower (relative) the second start's objective must be to replace the first's.
inline constexpr double kStartMargin = 0.01;

/// Fits `keys` of `start` on `rows` (each source weighted equally), with the shrinkage toward
/// `prior` where given (prior_weight); returns the fitted factors.
inline Factors fit_stack(std::vector<Item*>& rows, const std::vector<Key>& keys, Factors start,
                         const Factors* prior, Shrinkage shrink = Shrinkage::off) {
    std::map<std::string, std::vector<Item*>> by_source;
    for (Item* it : rows) by_source[it->row.c.set].push_back(it);
    auto decode = [&](const Values& x) {
        Factors f = start;
        for (std::size_t i = 0; i < keys.size(); ++i) {
            field(f, keys[i]) = is_fraction(keys[i])
                                    ? logistic(x[i])
                                    : std::max(0.0, std::exp(x[i]) - kHostTimeFloor_s);
        }
        return f;
    };
    auto objective = [&](const Values& x) {
        Factors f = decode(x);
        double total = 0;
        for (auto& [source, items] : by_source) {
            double sum = 0;
            for (Item* it : items) {
                set_factors(*it, f);
                const double d = log_error(*it);
                sum += d * d;
            }
            total += sum / double(items.size());
        }
        double penalty = 0;
        if (prior != nullptr) {
            Factors p = *prior;
            for (Key k : keys) {
                const double floor = is_fraction(k) ? 0.0 : kHostTimeFloor_s;
                const double r = std::log((field(f, k) + floor) / (field(p, k) + floor));
                penalty += prior_weight(k, by_source.size(), shrink) * r * r;
            }
        }
        return total / double(by_source.size()) + penalty;
    };
    auto descend = [&](Factors from) {
        Values x;
        for (Key k : keys) {
            const double v = std::clamp(field(from, k), 1e-3, 0.98);
            x.push_back(is_fraction(k) ? logit(v) : std::log(field(from, k) + kHostTimeFloor_s));
        }
        for (int restart = 0; restart < 3; ++restart) {
            x = nelder_mead(objective, x, 0.5, 120 * int(keys.size()));
        }
        return x;
    };
    Values x = descend(start);
    // A second start with kKernelLaunchStart_s of host time: from megatron-core's (near 0) the
    // simplex can settle where the host time stays 0 and the other factors absorb it (the
    // deepspeed stack: GEMM 1.0, collectives 0.2, vTrain 35% off). The lower objective wins,
    // by more than kStartMargin: where the rows do not see the host time (large kernels: any
    // host time below the kernels' own is hidden), both starts fit them alike and the first,
    // nearer the stack's start, is kept rather than whichever rounding favours.
    if (std::find(keys.begin(), keys.end(), Key::kernel_launch) != keys.end()) {
        Factors high = start;
        high.kernel_launch_s = kKernelLaunchStart_s;
        const Values y = descend(high);
        if (objective(y) < (1 - kStartMargin) * objective(x) - 1e-9) x = y;
    }
    return decode(x);
}

/// Every stack fitted on `items` except those of source `left_out` (empty: none left out).
inline std::map<std::string, Factors> fit_all(std::vector<Item>& items, const std::string& left_out,
                                              Shrinkage shrink = Shrinkage::off) {
    std::map<std::string, Factors> out;
    Factors core;
    for (const auto& [stack, keys] : kStackKeys) {
        std::vector<Item*> rows;
        for (Item& it : items) {
            if (it.row.c.stack == stack && it.row.c.set != left_out) rows.push_back(&it);
        }
        if (stack == "megatron-core") {
            Factors from;
            from.overlap = overlap_cost_from_env();
            from.collective_nic = nic_collective_from_env();
            from.attention_sustained = attention_sustained_from_env();
            const std::vector<Key> k = with_nic_key(stack, keys, from);
            core = fit_stack(rows, k, from, nullptr);
            out[stack] = core;
        } else {
            // deepspeed's host time starts from, and is drawn toward, the measured eager one;
            // rows fewer than the keys (a fold leaving one small source) do not determine them:
            // the stack keeps megatron-core's
            Factors start = core;
            if (stack == "deepspeed") start.kernel_launch_s = kEagerHostTime_s;
            const std::vector<Key> k = with_nic_key(stack, keys, start);
            out[stack] = rows.size() < k.size() ? start : fit_stack(rows, k, start, &start, shrink);
        }
    }
    return out;
}

/// The check on the presets' measured Hopper gemm_sustained (docs/calibration.md, "Sustained BF16
/// GEMMs on Hopper"): for each stack fitted on BF16 rows of its own on Hopper (`items` without
/// source `left_out`), its BF16 GEMM factor over megatron-core's (fitted on A100 rows). 1: the
/// measured fraction accounts for the stack's Hopper BF16 rows with megatron-core's GEMMs; below
/// 1, the stack's rows ask for slower GEMMs than the die's power-capped rate.
inline std::map<std::string, double> hopper_bf16_over_core(const std::vector<Item>& items,
                                                           const std::map<std::string, Factors>& f,
                                                           const std::string& left_out = "") {
    std::map<std::string, double> out;
    for (const auto& [stack, keys] : kStackKeys) {
        const bool fits_gemm = std::find(keys.begin(), keys.end(), Key::gemm) != keys.end();
        const bool has_rows = std::any_of(items.begin(), items.end(), [&](const Item& it) {
            const Case& c = it.row.c;
            return c.stack == stack && c.set != left_out && is_hopper(c.gpu) &&
                   c.precision == "bf16";
        });
        if (fits_gemm && has_rows && stack != "megatron-core") {
            out[stack] = f.at(stack).gemm / f.at("megatron-core").gemm;
        }
    }
    return out;
}

struct SourceError {
    std::string stack, gpu;
    ErrorStats s;
};

/// Error of every row of each source (or of `only`) with the factors `f`.
inline std::map<std::string, SourceError> errors(std::vector<Item>& items,
                                                 const std::map<std::string, Factors>& f,
                                                 const std::string& only = "") {
    std::map<std::string, SourceError> out;
    const bool verbose = std::getenv("PRISM_CALIBRATE_ROWS") != nullptr;
    for (Item& it : items) {
        if (!only.empty() && it.row.c.set != only) continue;
        set_factors(it, f.at(it.row.c.stack));
        const double pred = predict_item(it);
        const double err = relative_error(pred, it.row.c.measured);
        SourceError& e = out[it.row.c.set];
        e.stack = it.row.c.stack;
        if (e.gpu.find(it.row.c.gpu) == std::string::npos) {
            e.gpu += (e.gpu.empty() ? "" : ", ") + it.row.c.gpu;
        }
        e.s.add(err);
        if (verbose) {
            fmt::print("  {:<20} {:<40} measured {:>9.3f} predicted {:>9.3f} {:+6.1f}%\n",
                       it.row.c.set, it.row.c.label, it.row.c.measured, pred, 100 * err);
        }
    }
    for (auto& [name, e] : out) e.s.finish();
    return out;
}

}  // namespace prism::calibration
