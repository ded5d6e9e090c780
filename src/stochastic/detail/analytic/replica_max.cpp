#include "src/stochastic/detail/analytic/replica_max.hpp"

#include <algorithm>
#include <cmath>

#include "src/stochastic/detail/kernels.hpp"

namespace prism::stochastic::detail::ssta {

namespace {

/// dst[i] = linear interpolation of src at i - off (0 below the grid's start, its last value
/// above its end); the middle run, where both neighbours are on the grid, as one plain loop
void shifted(const std::vector<double>& src, double off, std::vector<double>& dst) {
    const int n = static_cast<int>(src.size());
    const double base = std::floor(off);
    const double fr = off - base;
    const int k0 = static_cast<int>(base);
    auto at = [&](int j) { return j < 0 ? 0.0 : src[std::min(j, n - 1)]; };
    // src at j - fr, j = i - k0: between src[j - 1] and src[j], both on the grid for i in [a, b)
    const int a = std::clamp(k0 + 1, 0, n);
    const int b = std::clamp(n + k0, a, n);
    for (int i = 0; i < a; ++i) {
        dst[i] = (1.0 - fr) * at(i - k0) + fr * at(i - k0 - 1);
    }
    for (int i = a; i < b; ++i) {
        dst[i] = (1.0 - fr) * src[i - k0] + fr * src[i - k0 - 1];
    }
    for (int i = b; i < n; ++i) {
        dst[i] = (1.0 - fr) * at(i - k0) + fr * at(i - k0 - 1);
    }
}

}  // namespace

ReplicaMax::ReplicaMax(const StepModel& m, const ReplicaSet& set, const Grid& x, bool linear_pgf)
    : m_(m), set_(set), x_(x), linear_pgf_(linear_pgf) {
    set_per_replica();
}

void ReplicaMax::set_per_replica() {
    // Slow units that each touch one replica, the same number u in every replica: replicas
    // are independent, each with K ~ Binomial(u, q) slow units. A replica with K >= 2 takes the
    // one-unit mixture shifted by the mean linear effect of the K - 1 others (additive when the
    // slow stages stay off the critical path's dwell, as with fewer microbatches than stages);
    // the PGF's product of CDF ratios would take their maximum instead.
    const auto& unit_pgf = set_.unit_pgf;
    const double units_per_replica = linear_pgf_ ? unit_pgf.units / m_.replicas : 0.0;
    per_replica_ =
        linear_pgf_ && units_per_replica >= 1 && units_per_replica == std::floor(units_per_replica);
    if (!per_replica_) return;
    double fsum = 0;
    for (const auto& [f, idx] : set_.rep_patterns) {
        lin_shift_mix_ += f * set_.types[idx[0]].extra_mean;
        fsum += f;
    }
    if (fsum > 0) lin_shift_mix_ /= fsum;
    const double u = units_per_replica, q = unit_pgf.q;
    double tail = 1.0;
    for (int k = 0; k <= u; ++k) {
        const double pk = binomial_pmf(u, k, q);
        binom_k_.push_back(pk);
        tail -= pk;
        if (tail * m_.replicas < 1e-8) break;  // F_D off by less than 1e-8
    }
}

std::vector<double> ReplicaMax::scenario_sum(const std::vector<std::vector<double>>& sft) const {
    std::vector<double> F(x_.n, 0.0);
    // log F_t once per type used, then per scenario a sum and one (vectorized) exp
    std::vector<std::vector<double>> log_f(sft.size());
    for (const auto& sc : set_.scenarios) {
        for (const auto& [t, c] : sc.counts) {
            if (!log_f[t].empty()) continue;
            log_f[t].resize(x_.n);
            for (int i = 0; i < x_.n; ++i) {
                const double s = sft[t][i];
                log_f[t][i] = s < 0.5 ? std::log1p(-s) : std::log(std::max(1e-300, 1.0 - s));
            }
        }
    }
    std::vector<double> lf(x_.n), ef(x_.n);
    for (const auto& sc : set_.scenarios) {
        std::fill(lf.begin(), lf.end(), 0.0);
        for (const auto& [t, c] : sc.counts) {
            for (int i = 0; i < x_.n; ++i) lf[i] += c * log_f[t][i];
        }
        exp_nonpositive_n(lf.data(), x_.n, ef.data());
        for (int i = 0; i < x_.n; ++i) F[i] += sc.weight * ef[i];
    }
    return F;
}

std::vector<double> ReplicaMax::per_replica_sum(const std::vector<double>& sfh,
                                                const std::vector<double>& sfm) const {
    // K ~ Binomial(u, q) of the replica's units slow. A unit moves the replica's linear part
    // by s (lin_shift_mix_: additive) and its stage terms as the one-unit mixture does (their
    // max: the PGF's ratio R): F_K(x) = F_h(y) R(y)^K at y = x - K s, R(y) = F_1(y + s) /
    // F_h(y); the sum is sum_k P(K = k) F_K / F_h. K = 1 is the mixture itself at the grid
    // point (no interpolation: F_D takes the d-th power).
    const int n = x_.n;
    std::vector<double> fh(n), f1(n);
    for (int i = 0; i < n; ++i) {
        fh[i] = std::max(0.0, 1.0 - sfh[i]);
        f1[i] = std::max(0.0, 1.0 - sfm[i]);
    }
    std::vector<double> rep_sum(n, binom_k_[0]);
    if (binom_k_.size() > 1) {
        for (int i = 0; i < n; ++i) {
            if (fh[i] > 1e-300) rep_sum[i] += binom_k_[1] * f1[i] / fh[i];
        }
    }
    const double sc = lin_shift_mix_ / x_.h;  // s in grid steps
    std::vector<double> fhy(n), f1y(n);
    for (size_t k = 2; k < binom_k_.size(); ++k) {
        shifted(fh, k * sc, fhy);
        shifted(f1, (k - 1.0) * sc, f1y);
        const double bk = binom_k_[k];
        for (int i = 0; i < n; ++i) {
            // without a branch (the loop vectorizes); where F_h or F_h(y) is 0 no term
            const bool ok = fh[i] > 1e-300 && fhy[i] > 1e-300;
            const double fy = ok ? fhy[i] : 1.0;
            const double r = std::min(1.0, f1y[i] / fy);
            double rk = r;  // r^k by products (k is small)
            for (size_t e = 1; e < k; ++e) rk *= r;
            const double term = bk * fy * rk / (ok ? fh[i] : 1.0);
            rep_sum[i] += ok ? term : 0.0;
        }
    }
    return rep_sum;
}

std::vector<double> ReplicaMax::table(const std::vector<std::vector<double>>& sft,
                                      const std::vector<double>& sfm) const {
    std::vector<double> F = scenario_sum(sft);
    if (set_.pgf_mode && !m_.lockstep) {
        const auto& unit_pgf = set_.unit_pgf;
        const std::vector<double> rep_sum =
            per_replica_ ? per_replica_sum(sft[0], sfm) : std::vector<double>{};
        // F_D = F_h^d (1 - q + q A)^units, A = E over a slow unit's pattern of the product of
        // its replicas' CDF ratios to the healthy replica: the CDF ratios F_t / F_h directly
        // (one division, no log / exp per type and point)
        std::vector<double> ratio(sft.size(), 1.0);
        for (int i = 0; i < x_.n; ++i) {
            const double fh = std::max(1e-300, 1.0 - sft[0][i]);
            if (fh < 1e-304) {  // log F_h < -700
                F[i] = 0;
                continue;
            }
            if (per_replica_) {
                F[i] *= std::exp(m_.replicas * std::log(std::max(1e-300, rep_sum[i])));
                continue;
            }
            double a = 0;
            if (linear_pgf_) {
                a = std::max(1e-300, 1.0 - sfm[i]) / fh;
            } else {
                for (size_t t = 1; t < sft.size(); ++t) {
                    ratio[t] = std::max(1e-300, 1.0 - sft[t][i]) / fh;
                }
                for (const auto& [f, idx] : set_.rep_patterns) {
                    double prod = 1;
                    for (const int t : idx) prod *= ratio[t];
                    a += f * prod;
                }
            }
            F[i] *= std::exp(unit_pgf.units *
                             std::log(std::max(1e-300, 1.0 - unit_pgf.q + unit_pgf.q * a)));
        }
    }
    F.back() = std::max(F.back(), 1.0 - 1e-15);
    return F;
}

void grid_moments(const std::vector<double>& F, const Grid& x, double& mean, double& var) {
    double m1 = 0, m2 = 0;
    for (int i = 1; i < x.n; ++i) {
        const double a = 1.0 - F[i - 1], b = 1.0 - F[i];
        const double xa = x.h * (i - 1), xb = x.h * i;
        m1 += 0.5 * x.h * (a + b);
        m2 += x.h * (xa * a + xb * b);
    }
    mean = x.lo + m1;
    var = std::max(0.0, m2 - m1 * m1);
}

}  // namespace prism::stochastic::detail::ssta
