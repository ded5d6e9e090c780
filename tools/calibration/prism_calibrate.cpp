// prism_calibrate: fits the A100 preset's non-datasheet constants (GEMM efficiency curve, HBM
// efficiency, collective efficiency, kernel-launch floor) by Nelder-Mead on the mean squared
// log error over
//   - the even rows (0-based) of vtrain_a100_single_node.csv (720 of 1440), and
//   - the even rows of megatron_sc21_table1_a100.csv (1.7B, 7.5B, 39.1B, 145.6B, 529.6B),
// the two sets weighted equally, and prints the error on every held-out row: the odd vTrain and
// SC'21 rows and all of Korthikanti et al. Table 5 (never fitted).
//
// Usage: prism_calibrate [DATA_DIR]   (default: the source tree's tests/data)

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "tools/calibration/reference_data.hpp"

namespace {

using namespace prism;
using namespace prism::calibration;

constexpr int kParams = 5;
using Params = std::array<double, kParams>;

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double logit(double p) { return std::log(p / (1.0 - p)); }

struct Constants {
    double gemm_max_efficiency, gemm_half_flops, hbm_efficiency, collective_efficiency,
        kernel_launch_s;
};

Constants decode(const Params& x) {
    return {logistic(x[0]), std::exp(x[1]), logistic(x[2]), logistic(x[3]), std::exp(x[4])};
}

void apply(const Constants& k, Experiment& e) {
    for (auto& hw : e.hardware) {
        hw.gpu.gemm.max_efficiency = k.gemm_max_efficiency;
        hw.gpu.gemm.half_flops = k.gemm_half_flops;
        hw.gpu.hbm_efficiency = k.hbm_efficiency;
        hw.collective_efficiency = k.collective_efficiency;
        hw.kernel_launch_s = k.kernel_launch_s;
    }
}

struct Item {
    Case c;
    Experiment e;
    Quantity q;
    bool train;
};

double log_error_sq(Item& it) {
    const double pred = predict(it.e, it.c, it.q);
    const double d = std::log(pred / it.c.measured);
    return d * d;
}

double objective(std::vector<Item>& vt, std::vector<Item>& sc, const Params& x) {
    const Constants k = decode(x);
    double a = 0, b = 0;
    int na = 0, nb = 0;
    for (auto& it : vt) {
        if (!it.train) continue;
        apply(k, it.e);
        a += log_error_sq(it);
        ++na;
    }
    for (auto& it : sc) {
        if (!it.train) continue;
        apply(k, it.e);
        b += log_error_sq(it);
        ++nb;
    }
    return 0.5 * a / na + 0.5 * b / nb;
}

/// Plain Nelder-Mead (Lagarias et al. 1998 coefficients).
template <class F>
Params nelder_mead(F f, Params x0, double step, int iterations) {
    std::array<Params, kParams + 1> simplex;
    std::array<double, kParams + 1> value;
    for (int i = 0; i <= kParams; ++i) {
        simplex[i] = x0;
        if (i > 0) simplex[i][i - 1] += step;
        value[i] = f(simplex[i]);
    }
    for (int it = 0; it < iterations; ++it) {
        std::array<int, kParams + 1> order;
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int b) { return value[a] < value[b]; });
        const int best = order[0], worst = order[kParams], second = order[kParams - 1];
        Params centroid{};
        for (int i = 0; i < kParams; ++i)
            for (int j = 0; j < kParams; ++j) centroid[j] += simplex[order[i]][j] / kParams;
        auto along = [&](double t) {
            Params p;
            for (int j = 0; j < kParams; ++j)
                p[j] = centroid[j] + t * (simplex[worst][j] - centroid[j]);
            return p;
        };
        const Params reflected = along(-1.0);
        const double fr = f(reflected);
        if (fr < value[best]) {
            const Params expanded = along(-2.0);
            const double fe = f(expanded);
            if (fe < fr) {
                simplex[worst] = expanded, value[worst] = fe;
            } else {
                simplex[worst] = reflected, value[worst] = fr;
            }
        } else if (fr < value[second]) {
            simplex[worst] = reflected, value[worst] = fr;
        } else {
            const Params contracted = fr < value[worst] ? along(-0.5) : along(0.5);
            const double fc = f(contracted);
            if (fc < std::min(fr, value[worst])) {
                simplex[worst] = contracted, value[worst] = fc;
            } else {
                for (int i = 1; i <= kParams; ++i) {
                    auto& p = simplex[order[i]];
                    for (int j = 0; j < kParams; ++j)
                        p[j] = simplex[best][j] + 0.5 * (p[j] - simplex[best][j]);
                    value[order[i]] = f(p);
                }
            }
        }
    }
    const auto best = std::min_element(value.begin(), value.end()) - value.begin();
    return simplex[best];
}

struct Summary {
    double mean_abs = 0, max_abs = 0;
    int n = 0;
};

Summary report(std::vector<Item>& items, const Constants& k, bool held_out, bool verbose,
               const char* unit) {
    Summary s;
    for (auto& it : items) {
        if (it.train == held_out) continue;
        apply(k, it.e);
        const double pred = predict(it.e, it.c, it.q);
        const double err = relative_error(pred, it.c.measured);
        s.mean_abs += std::abs(err);
        s.max_abs = std::max(s.max_abs, std::abs(err));
        ++s.n;
        if (verbose) {
            fmt::print("  {:<28} measured {:>9.3f} {}  predicted {:>9.3f}  error {:+6.1f}%\n",
                       it.c.label, it.c.measured, unit, pred, 100 * err);
        }
    }
    if (s.n > 0) s.mean_abs /= s.n;
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string dir = argc > 1 ? argv[1] : PRISM_REFERENCE_DATA_DIR;
    std::vector<Item> vt, sc, ko;
    const auto vcases = vtrain(dir);
    for (std::size_t i = 0; i < vcases.size(); ++i) {
        vt.push_back(
            {vcases[i], make_experiment(vcases[i]), Quantity::step_time_s, vtrain_is_train_row(i)});
    }
    const auto scases = megatron_sc21(dir);
    for (std::size_t i = 0; i < scases.size(); ++i) {
        sc.push_back({scases[i], make_experiment(scases[i]), Quantity::tflops_per_gpu,
                      sc21_is_train_row(i)});
    }
    for (const auto& c : korthikanti_table5(dir)) {
        ko.push_back({c, make_experiment(c), Quantity::step_time_s, false});
    }

    const HardwareSpec& preset = vt.front().e.hardware.front();
    Params x0{logit(0.75), std::log(1e9), logit(0.8), logit(0.8), std::log(20e-6)};
    auto f = [&](const Params& x) { return objective(vt, sc, x); };
    Params x = x0;
    for (int restart = 0; restart < 3; ++restart) x = nelder_mead(f, x, 0.5, 300);
    const Constants k = decode(x);

    fmt::print("fitted on {} vTrain rows (even) + {} SC'21 rows (even); objective {:.5f}\n",
               std::count_if(vt.begin(), vt.end(), [](const Item& i) { return i.train; }),
               std::count_if(sc.begin(), sc.end(), [](const Item& i) { return i.train; }), f(x));
    fmt::print(
        "gemm_max_efficiency = {:.4f}\ngemm_half_flops = {:.4g}\nhbm_efficiency = {:.4f}\n"
        "collective_efficiency = {:.4f}\nkernel_launch = \"{:.2f} us\"\n\n",
        k.gemm_max_efficiency, k.gemm_half_flops, k.hbm_efficiency, k.collective_efficiency,
        k.kernel_launch_s * 1e6);

    if (std::getenv("PRISM_CALIBRATE_BREAKDOWN")) {
        for (auto& it : ko) {
            apply(k, it.e);
            fmt::print("{}:\n{}\n", it.c.label,
                       format_breakdown(evaluate_deterministic(it.e, it.e.defaults)));
        }
    }
    fmt::print("Korthikanti et al. 2022 Table 5 (held out, step time):\n");
    const Summary sk = report(ko, k, true, true, "s");
    fmt::print("  mean |error| {:.2f}%  max {:.2f}%\n\n", 100 * sk.mean_abs, 100 * sk.max_abs);
    fmt::print("SC'21 Table 1 fitted rows (TFLOP/s per GPU):\n");
    const Summary s_fit = report(sc, k, false, true, "TF");
    fmt::print("SC'21 Table 1 held-out rows:\n");
    const Summary s_test = report(sc, k, true, true, "TF");
    fmt::print("  fitted mean {:.2f}% max {:.2f}%; held-out mean {:.2f}% max {:.2f}%\n\n",
               100 * s_fit.mean_abs, 100 * s_fit.max_abs, 100 * s_test.mean_abs,
               100 * s_test.max_abs);
    const Summary v_fit = report(vt, k, false, false, "s");
    const Summary v_test = report(vt, k, true, false, "s");
    fmt::print(
        "vTrain: fitted rows MAPE {:.2f}% (max {:.1f}%); held-out rows MAPE {:.2f}% "
        "(max {:.1f}%)\n",
        100 * v_fit.mean_abs, 100 * v_fit.max_abs, 100 * v_test.mean_abs, 100 * v_test.max_abs);
    if (const char* dump = std::getenv("PRISM_CALIBRATE_DUMP")) {
        std::FILE* out = std::fopen(dump, "w");
        fmt::print(out, "row,train,h,L,b,B,tp,dp,pp,measured_s,predicted_s\n");
        for (std::size_t i = 0; i < vt.size(); ++i) {
            auto& it = vt[i];
            apply(k, it.e);
            fmt::print(out, "{},{},{},{},{},{},{},{},{},{},{}\n", i, int(it.train), it.c.hidden,
                       it.c.layers, it.c.microbatch, it.c.global_batch, it.c.tp, it.c.dp, it.c.pp,
                       it.c.measured, predict(it.e, it.c, it.q));
        }
        std::fclose(out);
    }
    fmt::print(
        "\nother presets: same curve, gemm_half_flops scaled by peak_bf16 / {:.0f} TFLOP/s\n",
        preset.gpu.peak_bf16_flop_per_s * 1e-12);
    return 0;
}
