#include "src/stochastic/routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "src/common/error.hpp"
#include "src/stochastic/detail/hash.hpp"
#include "src/stochastic/detail/memo.hpp"
#include "src/stochastic/distribution.hpp"
#include "src/stochastic/random.hpp"

namespace prism::stochastic {

std::vector<double> rank_probabilities(const std::vector<double>& p, int ep) {
    if (ep <= 0 || p.empty() || p.size() % std::size_t(ep) != 0) {
        throw ModelError("routing: ep must divide the number of experts");
    }
    const double total = std::accumulate(p.begin(), p.end(), 0.0);
    const std::size_t per = p.size() / std::size_t(ep);
    std::vector<double> out(std::size_t(ep), 0.0);
    for (std::size_t e = 0; e < p.size(); ++e) out[e / per] += p[e] / total;
    return out;
}

namespace {

constexpr double kInvSqrt2Pi = 0.3989422804014327;  // the standard normal density at 0

/// P(max_r L_r <= x) of Y_r ~ N(mu_r, var_r) independent, conditioned on sum Y = total: the
/// product of the Phi(a_r) times f(sum Y = total | all Y_r <= x) / f(sum Y = total), the
/// conditional sum a normal with the truncated normals' means and variances summed.
double conditioned_max_cdf(double x, double total, const std::vector<double>& mu,
                           const std::vector<double>& var_r) {
    double product = 1.0, mean = 0.0, var = 0.0, var_all = 0.0;
    for (std::size_t r = 0; r < mu.size(); ++r) {
        const double sd = std::sqrt(var_r[r]);
        var_all += var_r[r];
        if (sd <= 0) continue;
        const double a = (x + 0.5 - mu[r]) / sd;
        const double cdf = normal_cdf(a);
        if (cdf <= 0.0) return 0.0;
        product *= cdf;
        const double ratio = kInvSqrt2Pi * std::exp(-0.5 * a * a) / cdf;
        mean += mu[r] - sd * ratio;
        var += var_r[r] * std::max(0.0, 1.0 - a * ratio - ratio * ratio);
    }
    if (var <= 0) return product;
    const double density_ratio =
        std::sqrt(var_all / var) * std::exp(-0.5 * (total - mean) * (total - mean) / var);
    return std::clamp(product * density_ratio, 0.0, 1.0);
}

}  // namespace

double max_rank_load_cdf(double x, double copies, const std::vector<double>& rank_p) {
    // Poissonized: Y_r ~ N(N P_r, N P_r) independent, the loads are Y given sum Y = N
    std::vector<double> mu(rank_p.size());
    for (std::size_t r = 0; r < mu.size(); ++r) mu[r] = copies * rank_p[r];
    return conditioned_max_cdf(x, copies, mu, mu);
}

double expected_max_load_factor(double copies, const std::vector<double>& rank_p) {
    if (rank_p.empty() || copies <= 0) return 1.0;
    double lo = 0, hi = 0, sd_min = copies;
    for (const double pr : rank_p) {
        const double mean = copies * pr, sd = std::sqrt(copies * pr);
        lo = std::max(lo, mean - 10.0 * sd);
        hi = std::max(hi, mean + 10.0 * sd + 1.0);
        if (sd > 0) sd_min = std::min(sd_min, sd);
    }
    hi = std::min(hi, copies);
    lo = std::floor(std::min(lo, hi));
    // E[M] = lo + sum over x >= lo of P(M > x) (integer loads; below lo P(M > x) = 1 to 1e-23);
    // wide laws by the midpoint rule in steps of sd / 16
    const double step = std::max(1.0, std::floor(sd_min / 16.0));
    double expected = lo;
    for (double x = lo; x < hi; x += step) {
        expected += step * (1.0 - max_rank_load_cdf(x + 0.5 * (step - 1.0), copies, rank_p));
    }
    return expected / (copies / double(rank_p.size()));
}

namespace {

/// The popularity with drift vector w (exp(drift w_e - drift^2 / 2) per expert).
std::vector<double> drifted(const RoutingLoad& r, const std::vector<double>& w) {
    std::vector<double> p = r.popularity;
    if (r.drift > 0) {
        for (std::size_t e = 0; e < p.size(); ++e) {
            p[e] *= std::exp(r.drift * w[e] - 0.5 * r.drift * r.drift);
        }
    }
    return p;
}

/// E[min(M, C)] and E[min(M, C)^2] over the law of M with rank means mu and variances var
/// (conditioned on the total N), C the capacity in copies (<= 0: none); integer loads in bins of
/// width sd / `bins_per_sd` over +-`reach` sd of the ranks' loads.
std::pair<double, double> capped_moments(double copies, const std::vector<double>& mu,
                                         const std::vector<double>& var, double cap,
                                         double bins_per_sd = 16.0, double reach = 10.0) {
    double lo = 0, hi = 0, sd_min = copies;
    for (std::size_t r = 0; r < mu.size(); ++r) {
        const double sd = std::sqrt(var[r]);
        lo = std::max(lo, mu[r] - reach * sd);
        hi = std::max(hi, mu[r] + reach * sd + 1.0);
        if (sd > 0) sd_min = std::min(sd_min, sd);
    }
    hi = std::min(hi, copies);
    lo = std::floor(std::min(lo, hi));
    const double step = std::max(1.0, std::floor(sd_min / bins_per_sd));
    double m1 = 0, m2 = 0, prev = 0;  // P(M <= lo - 1) below 1e-23
    for (double x = lo; x < hi + step; x += step) {
        const double f = conditioned_max_cdf(x + step - 1.0, copies, mu, var);
        const double mass = std::max(0.0, f - prev);
        prev = std::max(prev, f);
        double v = x + 0.5 * (step - 1.0);
        if (cap > 0) v = std::min(v, cap);
        m1 += mass * v;
        m2 += mass * v * v;
    }
    if (prev < 1.0) {  // the rest of the mass at hi (below 1e-20)
        const double v = cap > 0 ? std::min(hi, cap) : hi;
        m1 += (1.0 - prev) * v;
        m2 += (1.0 - prev) * v * v;
    }
    return {m1, m2};
}

std::uint64_t routing_hash(const RoutingLoad& r) {
    std::uint64_t h = detail::hash_mix(detail::hash_bits(r.copies), std::uint64_t(r.ep));
    h = detail::hash_mix(h, detail::hash_bits(r.drift));
    h = detail::hash_mix(h, detail::hash_bits(r.capacity));
    h = detail::hash_mix(h, r.seed);
    for (const double p : r.popularity) h = detail::hash_mix(h, detail::hash_bits(p));
    return h;
}

/// A per-thread memo of moments by the routing (and the draws' seed), exact keys.
template <class Compute>
LoadMoments memoized(const RoutingLoad& r, std::uint64_t extra, Compute compute) {
    thread_local detail::SmallMemo<std::pair<RoutingLoad, std::uint64_t>, LoadMoments> memo(64);
    return memo.get({r, extra}, compute);
}

}  // namespace

LoadMoments load_factor_moments(const RoutingLoad& r) {
    if (!r.active()) return {};
    return memoized(r, 0, [&r]() {
        // the drift as over-dispersion: given the step's popularity a rank's load is
        // Binomial(N, P_r(w)); over the drift its Poissonized variance gains N^2 Var(A_r),
        // A_r = sum over the rank's experts of p_e exp(drift w_e - drift^2 / 2) (normalized
        // p), Var(A_r) = (e^{drift^2} - 1) sum p_e^2; the total is N whatever the drift, which
        // the conditioning keeps
        const double share = r.copies / r.ep;
        const double cap = r.capacity > 0 ? r.capacity * share : 0.0;
        const std::vector<double> rank_p = rank_probabilities(r.popularity, r.ep);
        double total = 0;
        for (const double p : r.popularity) total += p;
        const double v = std::expm1(r.drift * r.drift);
        const std::size_t per = r.popularity.size() / std::size_t(r.ep);
        std::vector<double> mu(rank_p.size()), var(rank_p.size(), 0.0);
        for (std::size_t k = 0; k < rank_p.size(); ++k) mu[k] = r.copies * rank_p[k];
        for (std::size_t e = 0; e < r.popularity.size(); ++e) {
            const double p = r.popularity[e] / total;
            var[e / per] += r.copies * r.copies * v * p * p;
        }
        for (std::size_t k = 0; k < rank_p.size(); ++k) var[k] += mu[k];
        const auto [a, b] = capped_moments(r.copies, mu, var, cap);
        return LoadMoments{a / share, b / (share * share)};
    });
}

std::vector<double> draw_load_factors(const RoutingLoad& r, int draws, std::uint64_t seed) {
    std::vector<double> out;
    if (!r.active() || draws <= 0) return out;
    out.reserve(std::size_t(draws));
    Stream stream(seed, routing_hash(r), StreamKind::routing, 0);
    struct Bits {  // a UniformRandomBitGenerator over the Philox stream
        using result_type = std::uint32_t;
        Stream* s;
        static constexpr result_type min() { return 0; }
        static constexpr result_type max() { return 0xffffffffu; }
        result_type operator()() { return s->bits(); }
    } bits{&stream};
    const auto copies = static_cast<long long>(std::llround(r.copies));
    const double share = r.copies / r.ep;
    std::vector<double> w(r.popularity.size(), 0.0);
    std::vector<double> rank_p = rank_probabilities(r.popularity, r.ep);
    for (int d = 0; d < draws; ++d) {
        if (r.drift > 0) {
            for (auto& x : w) x = stream.normal32();
            rank_p = rank_probabilities(drifted(r, w), r.ep);
        }
        // the multinomial over the ranks (exact: the experts' multinomial summed per rank) as
        // sequential binomials of the copies left
        long long left = copies, busiest = 0;
        double p_left = 1.0;
        for (int k = 0; k < r.ep && left > 0; ++k) {
            long long load = left;
            if (k + 1 < r.ep) {
                const double q = std::clamp(rank_p[std::size_t(k)] / p_left, 0.0, 1.0);
                std::binomial_distribution<long long> binomial(left, q);
                load = binomial(bits);
            }
            busiest = std::max(busiest, load);
            left -= load;
            p_left -= rank_p[std::size_t(k)];
            if (p_left <= 0) p_left = 1e-300;
        }
        double z = double(busiest) / share;
        if (r.capacity > 0) z = std::min(z, r.capacity);
        out.push_back(z);
    }
    return out;
}

LoadMoments drawn_load_factor_moments(const RoutingLoad& r, int draws, std::uint64_t seed) {
    if (!r.active()) return {};
    return memoized(r, detail::hash_mix(seed, std::uint64_t(draws)), [&]() {
        const std::vector<double> z = draw_load_factors(r, draws, seed);
        double m1 = 0, m2 = 0;
        for (const double x : z) m1 += x, m2 += x * x;
        return LoadMoments{m1 / double(z.size()), m2 / double(z.size())};
    });
}

namespace {

/// E[Z | w] and E[Z^2 | w] given the step's drift vector w: the law of M with the drifted
/// rank probabilities and no over-dispersion (the multinomial given the popularity), in bins of
/// sd / 8 over +-7 sd (within 1e-6 of the law's sd / 16 over +-10 sd).
LoadMoments conditional_moments(const RoutingLoad& r, const std::vector<double>& w) {
    const double share = r.copies / r.ep;
    const double cap = r.capacity > 0 ? r.capacity * share : 0.0;
    const std::vector<double> rank_p = rank_probabilities(drifted(r, w), r.ep);
    std::vector<double> mu(rank_p.size());
    for (std::size_t k = 0; k < rank_p.size(); ++k) mu[k] = r.copies * rank_p[k];
    const auto [a, b] = capped_moments(r.copies, mu, mu, cap, 8.0, 7.0);
    return {a / share, b / (share * share)};
}

/// E[M] / share and Var(M) / share^2 for rank probabilities p by Clark's (1961) moments of the
/// max of the ranks' correlated normal loads (mean N P_r, covariance N (P_r 1{r = s} - P_r P_s):
/// the multinomial's), the ranks taken in decreasing order of their means: O(ep^2), for the
/// many nodes of shared_drift_law; with a capacity of `cap` copies (> 0) the max is taken as the
/// normal of Clark's moments capped there: E[min(X, C)] and E[min(X, C)^2] in closed form (the
/// exact nodes' regression corrects what the normal shape misses).
LoadMoments clark_moments(double copies, const std::vector<double>& p, double cap) {
    const std::size_t n = p.size();
    thread_local std::vector<std::size_t> order;
    thread_local std::vector<double> cov;  // Cov(running max, rank order[j])
    order.resize(n);
    for (std::size_t k = 0; k < n; ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&p](std::size_t a, std::size_t b) { return p[a] > p[b]; });
    const double N = copies;
    double mx = N * p[order[0]], vx = N * p[order[0]] * (1 - p[order[0]]);
    cov.resize(n);
    for (std::size_t j = 1; j < n; ++j) cov[j] = -N * p[order[0]] * p[order[j]];
    for (std::size_t j = 1; j < n; ++j) {
        const double py = p[order[j]];
        const double my = N * py, vy = N * py * (1 - py);
        const double a2 = std::max(vx + vy - 2 * cov[j], 1e-300);
        const double a = std::sqrt(a2);
        const double al = (mx - my) / a;
        const double fa = normal_cdf(al), fb = 1 - fa;
        const double ph = kInvSqrt2Pi * std::exp(-0.5 * al * al);
        const double m1 = mx * fa + my * fb + a * ph;
        const double m2 = (mx * mx + vx) * fa + (my * my + vy) * fb + (mx + my) * a * ph;
        for (std::size_t k = j + 1; k < n; ++k) {
            cov[k] = cov[k] * fa + (-N * py * p[order[k]]) * fb;
        }
        mx = m1;
        vx = std::max(0.0, m2 - m1 * m1);
    }
    const double share = N / double(n);
    double first = mx, second = vx + mx * mx;
    if (cap > 0) {
        // X ~ N(mx, vx), a = (C - mx) / sd: E[X; X < C] = mx Phi(a) - sd phi(a) and
        // E[X^2; X < C] = (mx^2 + vx) Phi(a) - sd (mx + C) phi(a); above C the value is C
        const double sd = std::sqrt(std::max(vx, 1e-300));
        const double a = (cap - mx) / sd;
        const double fa = normal_cdf(a), ph = kInvSqrt2Pi * std::exp(-0.5 * a * a);
        first = mx * fa - sd * ph + cap * (1 - fa);
        second = (mx * mx + vx) * fa - sd * (mx + cap) * ph + cap * cap * (1 - fa);
    }
    return {first / share, second / (share * share)};
}

/// Draws the drift vector w (one standard normal per expert) from `s`.
void draw_drift(Stream& s, std::vector<double>& w) {
    for (auto& x : w) x = s.normal32();
}

}  // namespace

int shared_drift_nodes(const RoutingLoad& r) {
    // about 2^20 expert and rank-pair operations: the nodes' cost bounded across shapes
    const double work = double(r.popularity.size()) + double(r.ep) * double(r.ep);
    const int n = int(std::clamp(std::ldexp(1.0, 20) / work, 1024.0, 8192.0));
    return n - n % 2;
}

SharedDrift shared_drift_law(const RoutingLoad& r) {
    if (!r.active() || !(r.drift > 0)) return {};
    thread_local detail::SmallMemo<RoutingLoad, SharedDrift> memo(64);
    return memo.get(r, [&r]() {
        // shared_drift_nodes drift vectors on the routing stream (id 1: not the exact draws' 0),
        // m(w) and Var(Z | w) by Clark's moments at each, and by the exact conditional law at the
        // first kSharedDriftExactNodes: the exact m regressed on Clark's (a control variate,
        // Clark's mean known to the many nodes) gives E[m(w)], the slope Clark's scale error
        Stream stream(r.seed, routing_hash(r), StreamKind::routing, 1);
        const std::size_t experts = r.popularity.size(), per = experts / std::size_t(r.ep);
        const double cap = r.capacity > 0 ? r.capacity * r.copies / r.ep : 0.0;
        const int nodes = shared_drift_nodes(r);
        std::vector<double> w(experts, 0.0), mc(static_cast<std::size_t>(nodes));
        std::vector<double> me(kSharedDriftExactNodes);
        std::vector<double> up(std::size_t(r.ep)), down(std::size_t(r.ep));
        double clark_var = 0, exact_cond_var = 0, clark_cond_var = 0;
        const double d = r.drift, damp = std::exp(-d * d);
        for (int k = 0; k < nodes; k += 2) {
            // a pair of nodes w and -w: exp(-d w - d^2 / 2) = e^{-d^2} / exp(d w - d^2 / 2)
            stream.normals32(w.data(), experts);
            std::fill(up.begin(), up.end(), 0.0);
            std::fill(down.begin(), down.end(), 0.0);
            double tu = 0, td = 0;
            for (std::size_t e = 0; e < experts; ++e) {
                const double f = std::exp(d * w[e] - 0.5 * d * d);
                up[e / per] += r.popularity[e] * f;
                down[e / per] += r.popularity[e] * damp / f;
            }
            for (const double x : up) tu += x;
            for (const double x : down) td += x;
            for (auto& x : up) x /= tu;
            for (auto& x : down) x /= td;
            for (int h = 0; h < 2; ++h) {
                const LoadMoments c = clark_moments(r.copies, h == 0 ? up : down, cap);
                mc[std::size_t(k + h)] = c.mean;
                clark_var += c.var() / nodes;
                if (k + h < kSharedDriftExactNodes) {
                    if (h == 1) {
                        for (auto& x : w) x = -x;
                    }
                    const LoadMoments e = conditional_moments(r, w);
                    me[std::size_t(k + h)] = e.mean;
                    exact_cond_var += e.var();
                    clark_cond_var += c.var();
                }
            }
        }
        const auto mean_of = [](const double* x, int n) {
            double a = 0;
            for (int i = 0; i < n; ++i) a += x[i];
            return a / n;
        };
        const int ne = kSharedDriftExactNodes;
        const double clark_mean = mean_of(mc.data(), nodes);
        const double ce = mean_of(mc.data(), ne), ee = mean_of(me.data(), ne);
        double sxy = 0, sxx = 0;
        for (int k = 0; k < ne; ++k) {
            sxy += (mc[std::size_t(k)] - ce) * (me[std::size_t(k)] - ee);
            sxx += (mc[std::size_t(k)] - ce) * (mc[std::size_t(k)] - ce);
        }
        const double beta = sxx > 0 ? sxy / sxx : 1.0;
        double resid = 0;
        for (int k = 0; k < ne; ++k) {
            const double e = me[std::size_t(k)] - ee - beta * (mc[std::size_t(k)] - ce);
            resid += e * e / std::max(1, ne - 2);
        }
        double m2 = 0, m3 = 0;
        for (const double x : mc) {
            m2 += (x - clark_mean) * (x - clark_mean) / (nodes - 1);
            m3 += (x - clark_mean) * (x - clark_mean) * (x - clark_mean) / nodes;
        }
        SharedDrift law;
        law.mean_factor = ee + beta * (clark_mean - ce);
        const double var_m = beta * beta * m2 + resid;
        law.sd = std::sqrt(var_m) / law.mean_factor;
        law.skew = m2 > 0 ? m3 / std::pow(m2, 1.5) : 0.0;
        if (r.capacity > 0) law.max_factor = r.capacity / law.mean_factor;
        // E[Var(Z | w)]: Clark's conditional variances over the many nodes, scaled by the exact
        // law's over Clark's at the exact nodes (Clark's variance of a max is off by a nearly
        // constant factor)
        law.cond_var = clark_cond_var > 0 ? clark_var * exact_cond_var / clark_cond_var : 0.0;
        return law;
    });
}

double drawn_shared_factor(const RoutingLoad& r, Stream& stream) {
    if (!r.active() || !(r.drift > 0)) return 1.0;
    thread_local std::vector<double> w;
    w.assign(r.popularity.size(), 0.0);
    draw_drift(stream, w);
    return conditional_moments(r, w).mean / shared_drift_law(r).mean_factor;
}

std::vector<double> skewed_popularity(int experts, double sigma, std::uint64_t seed) {
    std::vector<double> z(std::size_t(std::max(experts, 0)));
    for (std::size_t e = 0; e < z.size(); ++e) {
        z[e] = normal_quantile((double(e) + 0.5) / double(z.size()));
    }
    std::mt19937_64 rng(seed);
    std::shuffle(z.begin(), z.end(), rng);
    std::vector<double> p(z.size());
    for (std::size_t e = 0; e < z.size(); ++e) p[e] = std::exp(sigma * z[e] - 0.5 * sigma * sigma);
    return p;
}

}  // namespace prism::stochastic
