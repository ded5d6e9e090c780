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
    set_random_counts();
}

void ReplicaMax::set_per_replica() {
    // Slow units that each touch one replica, the same number u in every replica: replicas
    // are independent, each with K ~ Binomial(u, q) slow units. A replica with K >= 2 takes the
    // one-unit mixture shifted by the mean linear effect of the K - 1 others (additive when the
    // slow stages stay off the critical path's dwell, as with fewer microbatches than stages);
    // the PGF's product of CDF ratios would take their maximum instead.
    const auto& unit_pgf = set_.unit_pgf;
    const double units_per_replica =
        linear_pgf_ && !unit_pgf.random ? unit_pgf.units / m_.replicas : 0.0;
    per_replica_ = linear_pgf_ && !unit_pgf.random && units_per_replica >= 1 &&
                   units_per_replica == std::floor(units_per_replica);
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

void ReplicaMax::set_random_counts() {
    // Random placement: the N slow GPUs of the job land in uniformly random groups, so a
    // replica may hold K >= 2 of them (from one slow node spread over its stages, or from
    // several nodes). As above, their linear effects add up while their stage terms combine
    // as a max: a replica with K slow GPUs takes F_K(x) = F_h(y) R(y)^K at y = x - s D(K),
    // R = F_w / F_h the ratio of one slow GPU's stage terms alone (the mixture without the
    // types' offsets) to the healthy replica, s the mean offset of one slow GPU and D(K) =
    // p (1 - (1 - 1/p)^K) the expected number of distinct stages K GPUs hit (two in one group
    // slow it once). K = 1 is the mixture itself. The product over replicas given N is the
    // PGF's F_h^d r^N (r = F_1 / F_h, exact in N) times the corrections c_K = F_K / (F_h r^K)
    // of the replicas with K >= 2, taken as (E c_K)^d with K ~ Binomial(N, 1/d) (exact for
    // d = 1 and when collisions are rare). N = the slow GPUs in the job: J ~ Binomial(units,
    // q) slow units, each with Binomial(u, phi) of its GPUs in the job.
    const auto& unit_pgf = set_.unit_pgf;
    random_replicas_ = linear_pgf_ && unit_pgf.random;
    if (!random_replicas_) return;
    const int p = m_.stages;
    double s_mean = 0;
    for (const int t : set_.one_slow_at_stage) s_mean += set_.types[t].extra_mean / p;
    const auto u = static_cast<int>(unit_pgf.unit_gpus);
    std::vector<double> per_unit(u + 1);
    for (int j = 0; j <= u; ++j) per_unit[j] = binomial_pmf(u, j, unit_pgf.phi);
    std::vector<double> conv{1.0}, next;  // law of N given J, J = 0, 1, ...
    double cum = 0;
    for (int j = 0; j <= unit_pgf.units && cum < 1.0 - 1e-16; ++j) {
        const double pj = binomial_pmf(unit_pgf.units, j, unit_pgf.q);
        cum += pj;
        if (p_n_.size() < conv.size()) p_n_.resize(conv.size(), 0.0);
        for (size_t n = 0; n < conv.size(); ++n) p_n_[n] += pj * conv[n];
        next.assign(conv.size() + u, 0.0);
        for (size_t n = 0; n < conv.size(); ++n) {
            if (conv[n] < 1e-300) continue;
            for (int a = 0; a <= u; ++a) next[n + a] += conv[n] * per_unit[a];
        }
        conv.swap(next);
    }
    while (p_n_.size() > 1 && p_n_.back() < 1e-17) p_n_.pop_back();
    // The correction's exponent L(n) = d log E[c_K | N = n] is smooth in n: it is computed at
    // node counts (every count when there are few, else kRandomNodes evenly spaced ones over
    // the counts of probability >= 1e-17) and interpolated between them by cubic Lagrange
    // polynomials. Per node, P(K = k | N = n) for k < kMaxK (the rest lumped at kMaxK), by the
    // recurrence of the binomial pmf in log space (no log-gamma per term).
    constexpr size_t kRandomNodes = 32;
    while (n_lo_ + 1 < p_n_.size() && !(p_n_[n_lo_] >= 1e-17)) ++n_lo_;
    const size_t span = p_n_.size() - 1 - n_lo_;
    n_step_ = std::max<size_t>(1, (span + kRandomNodes - 1) / kRandomNodes);
    const size_t nodes = span / n_step_ + 1 + (n_step_ > 1 ? 3 : 0);  // cubic: past the end
    const double d = m_.replicas;
    constexpr int kMaxK = 256;  // a replica's K beyond it counts as kMaxK
    k_of_n_.resize(nodes);
    const double lq = std::log(1.0 / d), l1q = d > 1 ? std::log1p(-1.0 / d) : -HUGE_VAL;
    for (size_t j = 0; j < nodes; ++j) {
        const double n = static_cast<double>(n_lo_ + j * n_step_);
        auto& row = k_of_n_[j];
        double left = 1.0;
        if (d == 1) {
            row.assign(static_cast<size_t>(std::min<double>(n, kMaxK)) + 1, 0.0);
            row.back() = 1.0;  // K = N (capped)
            left = 0;
        } else {
            double lp = n * l1q;  // log P(K = 0)
            for (int k = 0; k <= n && k < kMaxK && left > 1e-15; ++k) {
                if (k > 0) lp += std::log((n - k + 1) / k) + lq - l1q;
                const double pk = std::exp(lp);
                row.push_back(pk);
                left -= pk;
            }
        }
        if (left > 1e-15) row.push_back(left);
        k_cap_ = std::max(k_cap_, static_cast<int>(row.size()) - 1);
    }
    for (int k = 0; k <= k_cap_; ++k) {
        shift_k_.push_back(s_mean * p * (1.0 - std::pow(1.0 - 1.0 / p, k)));
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

std::vector<std::vector<double>> ReplicaMax::random_corrections(
    const std::vector<double>& fh, const std::vector<double>& lfh, const std::vector<double>& lr,
    const std::vector<double>& fw) const {
    // c_k = F_h(y) / F_h (R(y) / r)^k, capped at 1
    const int n = x_.n;
    std::vector<double> rlin(n);
    for (int i = 0; i < n; ++i) rlin[i] = lr[i] > -HUGE_VAL ? std::exp(lr[i]) : 0.0;
    std::vector<std::vector<double>> ck(static_cast<size_t>(k_cap_) + 1);
    std::vector<double> fhy(n), fwy(n);
    for (int k = 2; k <= k_cap_; ++k) {
        shifted(fh, shift_k_[k] / x_.h, fhy);
        shifted(fw, shift_k_[k] / x_.h, fwy);
        auto& c = ck[k];
        c.assign(n, 1.0);
        for (int i = 0; i < n; ++i) {
            if (!(lfh[i] > -HUGE_VAL) || !(lr[i] > -HUGE_VAL)) continue;
            if (!(fhy[i] > 1e-300) || !(fwy[i] > 1e-300)) {
                c[i] = 0.0;  // F_K(x) = 0
                continue;
            }
            const double rho = fwy[i] / (fhy[i] * rlin[i]);
            double rk = rho;  // rho^k by products (k is at most a few dozen)
            for (int e = 1; e < k; ++e) rk *= rho;
            c[i] = std::min(1.0, fhy[i] / fh[i] * rk);
        }
    }
    return ck;
}

std::vector<double> ReplicaMax::random_count_sum(const std::vector<double>& sfh,
                                                 const std::vector<double>& sfm,
                                                 const std::vector<double>& sfw) const {
    const int n = x_.n;
    std::vector<double> fh(n), lfh(n), lr(n), fw(n);
    for (int i = 0; i < n; ++i) {
        fh[i] = std::max(0.0, 1.0 - sfh[i]);
        const double f1 = std::max(0.0, 1.0 - sfm[i]);
        fw[i] = std::max(0.0, 1.0 - sfw[i]);
        lfh[i] = fh[i] > 1e-300 ? std::log(fh[i]) : -HUGE_VAL;
        lr[i] = fh[i] > 1e-300 && f1 > 1e-300 ? std::log(f1) - lfh[i] : -HUGE_VAL;
    }
    // c_k on the grid, k = 2 .. k_cap (1 where F_h or F_1 is 0: no replica is below x then, or
    // none with a slow GPU)
    const auto ck = random_corrections(fh, lfh, lr, fw);
    // L at the nodes, then per count with P(N) >= 1e-17 (F_D off by less than the rest) the
    // term P(N) exp(N log r + L(N)), in log space
    const double d = m_.replicas;
    std::vector<std::vector<double>> lnode(k_of_n_.size(), std::vector<double>(n));
    for (size_t j = 0; j < k_of_n_.size(); ++j) {
        const auto& row = k_of_n_[j];
        const double c01 = row[0] + (row.size() > 1 ? row[1] : 0.0);
        for (int i = 0; i < n; ++i) {
            double e = c01;
            for (size_t k = 2; k < row.size(); ++k) e += row[k] * ck[k][i];
            lnode[j][i] = d * std::log(std::max(e, 1e-300));
        }
    }
    std::vector<double> rand_factor(n, 0.0);
    std::vector<double> xs(n), es(n);
    for (size_t nn = n_lo_; nn < p_n_.size(); ++nn) {
        if (!(p_n_[nn] >= 1e-17)) continue;
        // at a node its value (one tap), else cubic Lagrange through the nodes j0 .. j0 + 3
        // around nn
        const size_t rel = nn - n_lo_;
        double w[4] = {1.0, 0.0, 0.0, 0.0};
        size_t j0 = rel / n_step_;
        int taps = 1;
        if (rel % n_step_ != 0) {
            taps = 4;
            j0 = j0 > 0 ? j0 - 1 : 0;
            const double t = static_cast<double>(rel) / static_cast<double>(n_step_) -
                             static_cast<double>(j0);  // in (0, 3)
            for (int a = 0; a < 4; ++a) {
                w[a] = 1.0;
                for (int b = 0; b < 4; ++b) {
                    if (b != a) w[a] *= (t - b) / (a - b);
                }
            }
        }
        const double lp = std::log(p_n_[nn]);
        const double fn = static_cast<double>(nn);
        for (int i = 0; i < n; ++i) {
            double l = 0;
            for (int a = 0; a < taps; ++a) l += w[a] * lnode[j0 + a][i];
            // N log r: 0 at N = 0; a count of slow GPUs where F_1 = 0 adds nothing
            const double lt = nn == 0 ? 0.0 : fn * lr[i];
            xs[i] = lt > -HUGE_VAL ? lp + lt + std::min(0.0, l) : -HUGE_VAL;
        }
        exp_nonpositive_n(xs.data(), n, es.data());
        for (int i = 0; i < n; ++i) {
            rand_factor[i] += xs[i] > 0 ? std::exp(xs[i]) : es[i];  // (> 0: rounding)
        }
    }
    return rand_factor;
}

std::vector<double> ReplicaMax::table(const std::vector<std::vector<double>>& sft,
                                      const std::vector<double>& sfm,
                                      const std::vector<double>& sfw) const {
    std::vector<double> F = scenario_sum(sft);
    if (set_.pgf_mode && !m_.lockstep) {
        const auto& unit_pgf = set_.unit_pgf;
        const std::vector<double> rep_sum =
            per_replica_ ? per_replica_sum(sft[0], sfm) : std::vector<double>{};
        const std::vector<double> rand_factor =
            random_replicas_ ? random_count_sum(sft[0], sfm, sfw) : std::vector<double>{};
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
            if (random_replicas_) {
                F[i] *= rand_factor[i];
                continue;
            }
            // (random placement is linear and takes random_replicas_ above)
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
