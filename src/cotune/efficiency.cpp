#include "src/cotune/efficiency.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "src/common/error.hpp"

namespace prism::cotune {

namespace {

// 8-point Gauss-Legendre nodes and weights on [-1, 1] (Abramowitz & Stegun Table 25.4).
constexpr std::array<double, 4> kGaussX{0.1834346424956498, 0.5255324099163290, 0.7966664774136267,
                                        0.9602898564975363};
constexpr std::array<double, 4> kGaussW{0.3626837833783620, 0.3137066458778873, 0.2223810344533745,
                                        0.1012285362903763};

// The Kaplan profile is tabulated over 12 decades below the largest progress: the integrand
// grows like s^(alpha_S/alpha_B) = s^3.6 for small s, so what lies below is < 1e-40 of I.
constexpr double kDecades = 12.0;
constexpr int kPanelsPerDecade = 20;  // nodes 10^(1/20) = 1.122x apart

template <class F>
double gauss_legendre(F&& f, double a, double b) {
    const double half = 0.5 * (b - a);
    const double mid = 0.5 * (a + b);
    double sum = 0;
    for (std::size_t i = 0; i < kGaussX.size(); ++i) {
        sum += kGaussW[i] * (f(mid - half * kGaussX[i]) + f(mid + half * kGaussX[i]));
    }
    return half * sum;
}

void need_positive(double value, const char* what) {
    if (!(value > 0) || !std::isfinite(value)) {
        throw ModelError(fmt::format("cotune: {} must be > 0 (got {})", what, value));
    }
}

}  // namespace

double mccandlish_steps(double min_steps, double b_noise_tokens, double batch_tokens) {
    return min_steps * (1.0 + b_noise_tokens / batch_tokens);
}

double mccandlish_tokens(double min_tokens, double b_noise_tokens, double batch_tokens) {
    return min_tokens * (1.0 + batch_tokens / b_noise_tokens);
}

double pollux_efficiency(double phi_tokens, double base_batch_tokens, double batch_tokens) {
    return (phi_tokens + base_batch_tokens) / (phi_tokens + batch_tokens);
}

double kaplan_critical_batch(const KaplanParams& k, double loss) {
    return k.b_star_tokens * std::pow(loss, -1.0 / k.alpha_b);
}

double kaplan_loss(const KaplanParams& k, double parameters, double min_steps) {
    return std::pow(k.n_c / parameters, k.alpha_n) + std::pow(k.s_c / min_steps, k.alpha_s);
}

double kaplan_min_steps(const KaplanParams& k, double parameters, double loss) {
    const double asymptote = std::pow(k.n_c / parameters, k.alpha_n);
    if (!(loss > asymptote)) {
        throw ConfigError(fmt::format(
            "cotune.target_loss: {} is not above the loss a model of {:.4g} non-embedding "
            "parameters approaches, (n_c / N)^alpha_n = {:.4g} (Kaplan et al. 2020 Eq. 5.6)",
            loss, parameters, asymptote));
    }
    return k.s_c * std::pow(loss - asymptote, -1.0 / k.alpha_s);
}

NoiseProfile NoiseProfile::constant(double b_noise_tokens) {
    need_positive(b_noise_tokens, "B_noise");
    NoiseProfile p;
    p.constant_ = b_noise_tokens;
    p.max_progress_ = std::numeric_limits<double>::infinity();
    return p;
}

NoiseProfile NoiseProfile::kaplan(const KaplanParams& k, double parameters, double max_progress) {
    need_positive(parameters, "parameters N");
    need_positive(max_progress, "the progress to cover");
    NoiseProfile p;
    p.kaplan_params_.push_back(k);
    p.parameters_ = parameters;
    p.asymptote_ = std::pow(k.n_c / parameters, k.alpha_n);
    p.max_progress_ = max_progress;
    const int panels = static_cast<int>(kDecades) * kPanelsPerDecade;
    p.node_.reserve(panels + 2);
    p.integral_.reserve(panels + 2);
    p.node_.push_back(0.0);
    p.integral_.push_back(0.0);
    for (int j = 0; j <= panels; ++j) {
        const double s =
            max_progress * std::pow(10.0, -kDecades + static_cast<double>(j) / kPanelsPerDecade);
        p.integral_.push_back(p.integral_.back() + p.integral_between(p.node_.back(), s));
        p.node_.push_back(s);
    }
    p.node_.back() = max_progress;  // exactly, whatever pow rounded to
    return p;
}

double NoiseProfile::at(double progress) const {
    if (is_constant()) return constant_;
    if (progress <= 0) return 0.0;
    const KaplanParams& k = kaplan_params_.front();
    return kaplan_critical_batch(k, asymptote_ + std::pow(k.s_c / progress, k.alpha_s));
}

double NoiseProfile::integral_between(double from, double to) const {
    return gauss_legendre([this](double s) { return at(s); }, from, to);
}

double NoiseProfile::integral(double progress) const {
    if (progress <= 0) return 0.0;
    if (is_constant()) return constant_ * progress;
    if (progress > max_progress_ * (1 + 1e-12)) {
        throw ModelError(fmt::format(
            "cotune: progress {} beyond the {} optimal-batch steps the noise profile covers",
            progress, max_progress_));
    }
    // the last node at or below `progress`, then one panel shorter than the node spacing
    const auto above = std::upper_bound(node_.begin(), node_.end(), progress);
    const std::size_t j = static_cast<std::size_t>(above - node_.begin()) - 1;
    return integral_[j] + integral_between(node_[j], progress);
}

namespace {

/// The progress s1 >= s0 at which a phase at batch B has trained `tokens` more: the root of
/// f(s1) = B (s1 - s0) + I(s1) - I(s0) - tokens. f is increasing and convex (B_noise grows with
/// s), so Newton from a point right of the root (`upper`, where f >= 0) falls monotonically.
double progress_after(const NoiseProfile& noise, double s0, double batch, double tokens,
                      double upper) {
    if (noise.is_constant()) return s0 + tokens / (batch + noise.at(s0));
    const double base = noise.integral(s0);
    double s = upper;
    for (int it = 0; it < 100; ++it) {
        const double f = batch * (s - s0) + noise.integral(s) - base - tokens;
        const double step = f / (batch + noise.at(s));
        s = std::max(s - step, s0);
        if (std::abs(step) <= 1e-14 * s) break;
    }
    return s;
}

}  // namespace

double progress_of_tokens(const NoiseProfile& noise, double reference_batch_tokens, double tokens) {
    need_positive(reference_batch_tokens, "the reference batch");
    return progress_after(noise, 0.0, reference_batch_tokens, tokens,
                          std::min(tokens / reference_batch_tokens, noise.max_progress()));
}

Progress walk_to_target(const NoiseProfile& noise, double target_progress, double batch_tokens,
                        std::span<const RampPhase> ramp, double warmup_steps) {
    need_positive(batch_tokens, "the batch");
    Progress out;
    double s = 0;
    const double first_batch = ramp.empty() ? batch_tokens : ramp.front().batch_tokens;
    const double first_ratio = ramp.empty() ? 1.0 : ramp.front().step_time_ratio;
    out.steps = 0.5 * warmup_steps;
    out.tokens = out.steps * first_batch;
    out.equivalent_steps = out.steps * first_ratio;
    const double target_integral = noise.integral(target_progress);
    // Tokens a phase at `batch` takes from s to the target: B (s* - s) + I(s*) - I(s).
    auto to_target = [&](double batch) {
        return batch * (target_progress - s) + target_integral - noise.integral(s);
    };
    for (const RampPhase& phase : ramp) {
        if (s >= target_progress) break;
        if (phase.batch_tokens >= batch_tokens || out.tokens >= phase.until_tokens) continue;
        const double room = phase.until_tokens - out.tokens;
        const double rest = to_target(phase.batch_tokens);
        const double tokens = std::min(rest, room);
        const double steps = tokens / phase.batch_tokens;
        out.steps += steps;
        out.tokens += tokens;
        out.equivalent_steps += steps * phase.step_time_ratio;
        s = rest <= room ? target_progress
                         : progress_after(noise, s, phase.batch_tokens, room, target_progress);
    }
    if (s < target_progress) {
        const double tokens = to_target(batch_tokens);
        const double steps = tokens / batch_tokens;
        out.steps += steps;
        out.tokens += tokens;
        out.equivalent_steps += steps;
    }
    return out;
}

}  // namespace prism::cotune
