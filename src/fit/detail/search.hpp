#pragma once

// What the step fits share: the analytic evaluation they compare with, and the golden-section
// search they refine a log-spaced grid's best point with (step_fit.cpp, stall_fit.cpp).

#include <cmath>
#include <functional>
#include <utility>

#include "src/model/spec.hpp"

namespace prism::fit::detail {

/// The analytic evaluator without sensitivity metrics or slow-step thresholds.
inline EvaluationSpec analytic_evaluation() {
    EvaluationSpec e;
    e.method = Method::analytic;
    e.sensitivity = false;
    e.slow_deltas.clear();
    return e;
}

/// Golden-section search of f(exp(x)) over log x in [l, r], `iterations` steps; returns the
/// better of the last two probes as (x, f(exp(x))).
inline std::pair<double, double> golden_log(const std::function<double(double)>& f, double l,
                                            double r, int iterations) {
    constexpr double kGolden = 0.6180339887498949;
    double x1 = r - kGolden * (r - l), x2 = l + kGolden * (r - l);
    double f1 = f(std::exp(x1)), f2 = f(std::exp(x2));
    for (int i = 0; i < iterations; ++i) {
        if (f1 <= f2) {
            r = x2;
            x2 = x1;
            f2 = f1;
            x1 = r - kGolden * (r - l);
            f1 = f(std::exp(x1));
        } else {
            l = x1;
            x1 = x2;
            f1 = f2;
            x2 = l + kGolden * (r - l);
            f2 = f(std::exp(x2));
        }
    }
    return f1 <= f2 ? std::pair{x1, f1} : std::pair{x2, f2};
}

}  // namespace prism::fit::detail
