#include "src/stochastic/documents.hpp"

#include <algorithm>
#include <cmath>

#include "src/common/error.hpp"
#include "src/stochastic/detail/hash.hpp"
#include "src/stochastic/detail/memo.hpp"
#include "src/stochastic/distribution.hpp"
#include "src/stochastic/random.hpp"

namespace prism::stochastic {

std::vector<double> packed_squares(const std::vector<std::int64_t>& docs, int seq) {
    std::vector<double> out;
    if (seq <= 0) return out;
    double s = 0;
    std::int64_t used = 0;  // tokens of the current sequence
    for (std::int64_t left : docs) {
        while (left > 0) {
            const std::int64_t piece = std::min<std::int64_t>(left, seq - used);
            s += double(piece) * double(piece);
            used += piece;
            left -= piece;
            if (used == seq) {
                out.push_back(s);
                s = 0;
                used = 0;
            }
        }
    }
    return out;
}

namespace {

/// P(X > x) of the lognormal X.
double x_sf(const DocumentPacking& d, double x) {
    if (x <= 0) return 1.0;
    if (d.sigma <= 0) return x < d.median_tokens ? 1.0 : 0.0;
    return normal_sf(std::log(x / d.median_tokens) / d.sigma);
}

/// sum_{j >= c} P(X > j) for integer c >= 1: E[(X - c)^+] + P(X > c) / 2 (Euler-Maclaurin, the
/// next term f'(c) / 12 below 1e-3 tokens for any law with median >= 1)
double x_sf_tail_sum(const DocumentPacking& d, double c) {
    if (d.sigma <= 0) {
        double sum = 0;  // exact: the integers j in [c, median)
        for (double j = c; j < d.median_tokens; j += 1) sum += 1;
        return sum;
    }
    const double d2 = std::log(d.median_tokens / c) / d.sigma;
    const double excess =
        d.median_tokens * std::exp(0.5 * d.sigma * d.sigma) * normal_cdf(d2 + d.sigma) -
        c * normal_cdf(d2);
    return std::max(0.0, excess) + 0.5 * x_sf(d, c);
}

/// P(L >= r) for integer r >= 1 (L = max(1, ceil(X)): P(L >= r) = P(X > r - 1) for r >= 2).
double l_at_least(const DocumentPacking& d, std::int64_t r) {
    return r <= 1 ? 1.0 : x_sf(d, double(r - 1));
}

SquareMoments compute_moments(const DocumentPacking& d) {
    const std::int64_t seq = d.seq;
    const int n = int(std::min<std::int64_t>(seq, 4096));  // cells of u = seq / n tokens
    const double u = double(seq) / n;
    // per cell: mass and conditional second and fourth moments, of a whole document (p, q,
    // r) and of the first piece (the residual: pr, qr, rr, unnormalized by E[L])
    std::vector<double> p(n + 1, 0.0), q(n + 1, 0.0), r4(n + 1, 0.0);
    std::vector<double> pr(n + 1, 0.0), qr(n + 1, 0.0), rr(n + 1, 0.0);
    double prev = 1.0;  // P(L >= l)
    for (std::int64_t l = 1; l <= seq; ++l) {
        const double ge_next = l_at_least(d, l + 1);
        const double mass = std::max(0.0, prev - ge_next);
        const auto k = std::size_t((l * n + seq - 1) / seq);  // ceil(l n / seq)
        const double l2 = double(l) * double(l);
        p[k] += mass;
        q[k] += mass * l2;
        r4[k] += mass * l2 * l2;
        pr[k] += prev;
        qr[k] += prev * l2;
        rr[k] += prev * l2 * l2;
        prev = ge_next;
    }
    // E[L] = sum_{r >= 1} P(L >= r); beyond seq from the tail sum of P(X > j), j >= seq
    double mean_l = 0;
    for (std::size_t k = 1; k <= std::size_t(n); ++k) mean_l += pr[k];
    const double tail = x_sf_tail_sum(d, double(seq));
    mean_l += tail;
    // A_j, B_j over the remaining cells j, the window starting at a document boundary
    std::vector<double> a(n + 1, 0.0), b(n + 1, 0.0);
    double above = 1.0;  // P(L > j u) for the current j
    std::vector<double> cell_above(n + 1, 1.0);
    for (int j = 1; j <= n; ++j) {
        above -= p[std::size_t(j)];
        cell_above[std::size_t(j)] = std::max(0.0, above);
    }
    for (int j = 1; j <= n; ++j) {
        double sa = 0, sb = 0;
        for (int k = 1; k <= j; ++k) {
            const double ar = a[std::size_t(j - k)];
            sa += q[k] + p[k] * ar;
            sb += r4[k] + 2.0 * q[k] * ar + p[k] * b[std::size_t(j - k)];
        }
        const double len = j * u, len2 = len * len;
        const double cut = cell_above[std::size_t(j)];
        a[std::size_t(j)] = sa + cut * len2;
        b[std::size_t(j)] = sb + cut * len2 * len2;
    }
    // the stationary window: the residual first, then a window of n - k cells
    double m1 = 0, m2 = 0;
    for (int k = 1; k <= n; ++k) {
        const double ar = a[std::size_t(n - k)];
        m1 += qr[k] + pr[k] * ar;
        m2 += rr[k] + 2.0 * qr[k] * ar + pr[k] * b[std::size_t(n - k)];
    }
    const double s2 = double(seq) * double(seq);
    m1 = (m1 + tail * s2) / mean_l;
    m2 = (m2 + tail * s2 * s2) / mean_l;
    return {m1, m2};
}

std::uint64_t packing_hash(const DocumentPacking& d) {
    std::uint64_t h = detail::hash_mix(detail::hash_bits(d.median_tokens), std::uint64_t(d.seq));
    return detail::hash_mix(h, detail::hash_bits(d.sigma));
}

}  // namespace

double mean_document_length(const DocumentPacking& d) {
    double sum = 1.0;  // P(L >= 1)
    const std::int64_t c = std::max<std::int64_t>(d.seq, 1);
    for (std::int64_t j = 1; j < c; ++j) sum += x_sf(d, double(j));
    return sum + x_sf_tail_sum(d, double(c));
}

SquareMoments packed_square_moments(const DocumentPacking& d) {
    if (!d.active()) throw ModelError("documents: median and seq must be positive");
    thread_local detail::SmallMemo<DocumentPacking, SquareMoments> memo(32);
    return memo.get(d, [&d]() { return compute_moments(d); });
}

std::vector<double> draw_packed_squares(const DocumentPacking& d, int count, std::uint64_t seed) {
    std::vector<double> out;
    if (!d.active() || count <= 0) return out;
    constexpr int kBurnIn = 16;
    out.reserve(std::size_t(count));
    Stream stream(seed, packing_hash(d), StreamKind::documents, 0);
    const std::int64_t seq = d.seq;
    std::int64_t left = 0, used = 0;  // tokens left of the current document, of the sequence
    double s = 0;
    int skipped = 0;
    while (int(out.size()) < count) {
        if (left == 0) {
            const double x = d.median_tokens * std::exp(d.sigma * stream.normal());
            // ceil(X) capped far above any window (a document longer than the next
            // sequences fills them whole; its length beyond them does not matter)
            left = std::max<std::int64_t>(1, std::int64_t(std::ceil(std::min(x, 1e15))));
        }
        const std::int64_t piece = std::min(left, seq - used);
        s += double(piece) * double(piece);
        used += piece;
        left -= piece;
        if (used == seq) {
            if (skipped < kBurnIn) {
                ++skipped;
            } else {
                out.push_back(s);
            }
            s = 0;
            used = 0;
        }
    }
    return out;
}

std::shared_ptr<const std::vector<double>> packed_square_table(const DocumentPacking& d) {
    thread_local detail::SmallMemo<DocumentPacking, std::shared_ptr<const std::vector<double>>>
        memo(16);
    return memo.get(d, [&d]() {
        return std::make_shared<const std::vector<double>>(
            draw_packed_squares(d, kDocumentDraws, 0));
    });
}

namespace {

/// A law on the grid lo + k h, k < p.size().
struct GridLaw {
    double lo = 0, h = 1;
    std::vector<double> p;
};

/// `x` with mass `w` split linearly between the two grid atoms around it.
void put(GridLaw& g, double x, double w) {
    const int last = int(g.p.size()) - 1;
    if (last <= 0 || !(g.h > 0)) {
        g.p[0] += w;
        return;
    }
    const double t = std::clamp((x - g.lo) / g.h, 0.0, double(last));
    const int k = std::min(int(t), last - 1);
    const double f = t - k;
    g.p[std::size_t(k)] += (1 - f) * w;
    g.p[std::size_t(k + 1)] += f * w;
}

/// The atoms of `g` put on `atoms` equally spaced atoms over its support less 1e-16 of the mass
/// at either end (a sum's atoms would otherwise spread over its whole range, n times a
/// draw's, while its mass lies within a few sqrt(n) sd: the spacing, and the variance each
/// product adds, kept small); the trimmed mass joins the nearest kept atom.
GridLaw rebin(const GridLaw& g, int atoms) {
    constexpr double kTrim = 1e-16;
    int first = 0, last = int(g.p.size()) - 1;
    double below = 0, above = 0;
    while (first < last && below + g.p[std::size_t(first)] <= kTrim)
        below += g.p[std::size_t(first++)];
    while (last > first && above + g.p[std::size_t(last)] <= kTrim)
        above += g.p[std::size_t(last--)];
    GridLaw out;
    out.lo = g.lo + first * g.h;
    const double span = (last - first) * g.h;
    const int k = span > 0 ? atoms : 1;
    out.h = span > 0 ? span / (k - 1) : 1.0;
    out.p.assign(std::size_t(k), 0.0);
    for (int i = first; i <= last; ++i) put(out, g.lo + i * g.h, g.p[std::size_t(i)]);
    out.p.front() += below;
    out.p.back() += above;
    return out;
}

/// The law of the sum of independent a and b on the same spacing.
GridLaw convolve(const GridLaw& a, const GridLaw& b) {
    GridLaw out;
    out.lo = a.lo + b.lo;
    out.h = a.h;
    out.p.assign(a.p.size() + b.p.size() - 1, 0.0);
    for (std::size_t i = 0; i < a.p.size(); ++i) {
        if (a.p[i] <= 0) continue;
        for (std::size_t j = 0; j < b.p.size(); ++j) out.p[i + j] += a.p[i] * b.p[j];
    }
    return out;
}

/// a + b on a common spacing (the coarser one; the finer law put on it first).
GridLaw add(const GridLaw& a, const GridLaw& b, int atoms) {
    const GridLaw* fine = a.h < b.h ? &a : &b;
    const GridLaw* coarse = a.h < b.h ? &b : &a;
    GridLaw f;
    f.h = coarse->h;
    f.lo = fine->lo;
    f.p.assign(std::size_t(std::ceil((fine->h * double(fine->p.size() - 1)) / f.h)) + 2, 0.0);
    for (std::size_t i = 0; i < fine->p.size(); ++i)
        put(f, fine->lo + double(i) * fine->h, fine->p[i]);
    return rebin(convolve(*coarse, f), atoms);
}

}  // namespace

std::shared_ptr<const AtomLaw> centered_sum_law(
    const std::shared_ptr<const std::vector<double>>& draws, int n, int atoms) {
    // keyed by the table's address, which the stored shared_ptr keeps from being reused
    using Key = std::pair<std::shared_ptr<const std::vector<double>>, std::pair<int, int>>;
    thread_local detail::SmallMemo<Key, std::shared_ptr<const AtomLaw>> memo(64);
    return memo.get(Key{draws, {n, atoms}}, [&]() -> std::shared_ptr<const AtomLaw> {
        const auto [lo, hi] = std::minmax_element(draws->begin(), draws->end());
        double mean = 0;
        for (const double x : *draws) mean += x / double(draws->size());
        GridLaw one;
        one.lo = *lo;
        one.h = *hi > *lo ? (*hi - *lo) / (atoms - 1) : 1.0;
        one.p.assign(std::size_t(*hi > *lo ? atoms : 1), 0.0);
        for (const double x : *draws) put(one, x, 1.0 / double(draws->size()));
        // repeated squaring: sum = one^n
        GridLaw sum, power = one;
        bool have = false;
        for (int k = std::max(1, n); k > 0; k >>= 1) {
            if (k & 1) {
                sum = have ? add(sum, power, atoms) : power;
                have = true;
            }
            if (k > 1) power = rebin(convolve(power, power), atoms);
        }
        auto law = std::make_shared<AtomLaw>();
        for (std::size_t k = 0; k < sum.p.size(); ++k) {
            if (sum.p[k] <= 0) continue;
            law->x.push_back(sum.lo + double(k) * sum.h - double(std::max(1, n)) * mean);
            law->w.push_back(sum.p[k]);
        }
        return law;
    });
}

}  // namespace prism::stochastic
