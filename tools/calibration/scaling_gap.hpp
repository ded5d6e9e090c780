#pragma once

// How a source's measured steps grow with the GPU count beyond what the deterministic model
// predicts (docs/calibration.md, "Weak scaling"): the per-doubling gap of `prism_calibrate
// scaling`. Rows of one source that differ only in their GPU count (and batch) form a group;
// within each group the log of measured step / predicted step is regressed on log2(GPUs) with
// one intercept per group (the fixed-effects slope), so the fitted level of a stack cancels and
// what remains is the cost per doubling the model lacks.

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace prism::calibration {

/// One row: its group, its GPU count and log(measured step / predicted step).
struct ScalingPoint {
    std::string group;
    int gpus = 1;
    double log_ratio = 0;
};

struct ScalingGap {
    int groups = 0;  ///< groups with at least two GPU counts (the others carry no slope)
    int rows = 0;    ///< rows in those groups
    int min_gpus = 0, max_gpus = 0;
    double slope = 0;     ///< d log(measured / predicted) / d log2(GPUs)
    double slope_se = 0;  ///< its standard error (0 with no residual degrees of freedom)
    /// The gap per doubling of the GPU count: exp(slope) - 1.
    double per_doubling() const { return std::exp(slope) - 1; }
};

/// The fixed-effects slope of log_ratio on log2(gpus) over `points` (groups with a single GPU
/// count dropped): slope = sum (x - mean_g x)(y - mean_g y) / sum (x - mean_g x)^2, its standard
/// error from the residuals with rows - groups - 1 degrees of freedom.
inline ScalingGap scaling_gap(const std::vector<ScalingPoint>& points) {
    struct Sums {
        double n = 0, x = 0, y = 0;
        int min_gpus = 0, max_gpus = 0;
    };
    std::map<std::string, Sums> by;
    for (const ScalingPoint& p : points) {
        Sums& s = by[p.group];
        s.min_gpus = s.n == 0 ? p.gpus : std::min(s.min_gpus, p.gpus);
        s.max_gpus = s.n == 0 ? p.gpus : std::max(s.max_gpus, p.gpus);
        s.n += 1;
        s.x += std::log2(double(p.gpus));
        s.y += p.log_ratio;
    }
    ScalingGap g;
    double sxx = 0, sxy = 0;
    for (const ScalingPoint& p : points) {
        const Sums& s = by.at(p.group);
        if (s.min_gpus == s.max_gpus) continue;
        const double dx = std::log2(double(p.gpus)) - s.x / s.n, dy = p.log_ratio - s.y / s.n;
        sxx += dx * dx;
        sxy += dx * dy;
        ++g.rows;
        g.min_gpus = g.rows == 1 ? p.gpus : std::min(g.min_gpus, p.gpus);
        g.max_gpus = std::max(g.max_gpus, p.gpus);
    }
    for (const auto& [name, s] : by) g.groups += s.min_gpus != s.max_gpus ? 1 : 0;
    if (sxx <= 0) return g;
    g.slope = sxy / sxx;
    double ssr = 0;
    for (const ScalingPoint& p : points) {
        const Sums& s = by.at(p.group);
        if (s.min_gpus == s.max_gpus) continue;
        const double dx = std::log2(double(p.gpus)) - s.x / s.n, dy = p.log_ratio - s.y / s.n;
        ssr += (dy - g.slope * dx) * (dy - g.slope * dx);
    }
    const int dof = g.rows - g.groups - 1;
    g.slope_se = dof > 0 ? std::sqrt(ssr / dof / sxx) : 0;
    return g;
}

}  // namespace prism::calibration
