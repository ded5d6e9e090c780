#include <algorithm>
#include <cmath>
#include <cstdint>

#include "src/stochastic/detail/analytic/replica_law.hpp"
#include "src/stochastic/detail/kernels.hpp"

namespace prism::stochastic::detail::ssta {

ReplicaLaw::MixtureMasses ReplicaLaw::mixture_masses(
    const std::vector<std::pair<double, const ReplicaType*>>& mix) const {
    MixtureMasses mm;
    for (const auto& [w, t] : mix) mm.total_weight += w;
    if (!c_.w_random) return mm;
    // W cells on the x grid's spacing (hw = h), so that every (x_i - x_j) is a whole number of
    // steps plus one fixed offset: the Gaussian kernel is tabulated once per call. Atoms at the
    // cell midpoints, smoothed by the cell width.
    const double hw = x_.h;
    const int kw = std::clamp(static_cast<int>(std::ceil((w_hi_ - w_lo_) / hw)), 1, 4 * x_.n);
    mm.kw = kw;
    // the sf is linear in the masses: types with the same extra mean (offset) are summed first
    std::vector<std::uint8_t> done(mix.size(), 0);
    std::vector<double> summed;
    auto& groups = mm.groups;
    for (size_t first = 0; first < mix.size(); ++first) {
        if (done[first]) continue;
        const double extra = mix[first].second->extra_mean;
        if (mix.size() > 1 && conditional(*mix[first].second)) {
            // linear in sf_Y too: types with the same offset and smax law share one
            // conditional sum
            const GroupLaw* ulaw = mix[first].second->stage_law[c_.smax];
            thread_local std::vector<double> ysum, ysf;
            ysum.clear();
            double wsum = 0;
            for (size_t k = first; k < mix.size(); ++k) {
                const ReplicaType& t = *mix[k].second;
                if (done[k] || !conditional(t) || t.extra_mean != extra ||
                    t.stage_law[c_.smax] != ulaw) {
                    continue;
                }
                done[k] = 1;
                y_sf(t, kw, hw, ysf);
                if (ysum.empty()) ysum.assign(ysf.size(), 0.0);
                for (size_t y = 0; y < ysf.size(); ++y) ysum[y] += mix[k].first * ysf[y];
                wsum += mix[k].first;
            }
            cond_masses(ulaw, ysum.data(), wsum, kw, hw, summed);
            groups.push_back({extra, summed});
            continue;
        }
        const std::vector<double>* pjp = &w_masses(*mix[first].second, kw, hw);
        if (mix.size() > 1 || mix[first].first != 1.0) {
            summed.assign(kw, 0.0);
            for (size_t k = first; k < mix.size(); ++k) {
                if (done[k] || mix[k].second->extra_mean != extra) continue;
                done[k] = 1;
                const auto& pk = w_masses(*mix[k].second, kw, hw);
                for (int j = 0; j < kw; ++j) summed[j] += mix[k].first * pk[j];
            }
            pjp = &summed;
        }
        groups.push_back({extra, *pjp});
    }
    return mm;
}

std::vector<double> ReplicaLaw::mixture_sf(const MixtureMasses& mm, double noise_sd) const {
    const double total_weight = mm.total_weight;
    std::vector<double> sf(x_.n, 0.0);
    if (!c_.w_random) {
        const double mu = c_.mu_o;
        for (int i = 0; i < x_.n; ++i) {
            const double x = x_.at(i);
            if (m_.single.present) {
                const auto& s = m_.single;
                const auto& X = m_.transient[s.cls];
                const double scale = s.base_s * (s.comm ? c_.r_bar : 1.0);
                const double y = X.max_moments(s.n).mean + x / scale;
                sf[i] = total_weight * (1.0 - X.max_cdf(y, s.n));
            } else if (noise_sd > 0 && !c_.doc_x.empty()) {
                // the documents' term's atoms, each smoothed by the normal rest of the noise
                const double sd = documents_sd(noise_sd);
                sf[i] = total_weight * documents_sf(x - mu, sd);
            } else {
                sf[i] = total_weight *
                        (noise_sd > 0 ? normal_sf((x - mu) / noise_sd) : (x < mu ? 1.0 : 0.0));
            }
        }
        return sf;
    }
    const int kw = mm.kw;
    const double hw = x_.h;
    const auto& groups = mm.groups;
    if (groups.size() == 1) {
        convolve_add(groups[0].second, kw, groups[0].first, noise_sd, sf);
    } else {
        // One Gaussian convolution for all: each group's masses move by its offset / hw cells,
        // split linearly between the two nearest (the mean kept, a variance of at most hw^2 / 4
        // added, against the hw^2 / 12 of a cell's own smoothing)
        double lo = 0, hi = 0;
        for (const auto& g : groups) {
            lo = std::min(lo, std::floor(g.first / hw));
            hi = std::max(hi, std::floor(g.first / hw) + 1);
        }
        const int shift0 = static_cast<int>(lo);
        const int kc = kw + static_cast<int>(hi - lo);
        std::vector<double> all(kc, 0.0);
        for (const auto& [extra, pj] : groups) {
            const double cells = extra / hw;
            const double base = std::floor(cells);
            const double f = cells - base;
            const int at = static_cast<int>(base) - shift0;
            for (int j = 0; j < kw; ++j) {
                all[j + at] += (1.0 - f) * pj[j];
                all[j + at + 1] += f * pj[j];
            }
        }
        convolve_add(all, kc, shift0 * hw, noise_sd, sf);
    }
    for (double& x : sf) x = std::min(1.0, x);
    return sf;
}

double ReplicaLaw::documents_sd(double noise_sd) const {
    const double rest = std::max(0.0, noise_sd * noise_sd - c_.doc_var);
    return std::sqrt(rest + x_.h * x_.h / 12.0);
}

double ReplicaLaw::documents_sf(double dx, double sd) const {
    double sf = 0;
    for (std::size_t k = 0; k < c_.doc_x.size(); ++k) {
        sf += c_.doc_w[k] * normal_sf((dx - c_.doc_x[k]) / sd);
    }
    return sf;
}

void ReplicaLaw::convolve_add(const std::vector<double>& pj, int kw, double extra_mean,
                              double noise_sd, std::vector<double>& sf) const {
    const double hx = x_.h;
    const double hw = hx;
    const double x0 = w_lo_ + 0.5 * hw + c_.mu_o + extra_mean;  // atom j: x0 + j hx
    // with the documents' term the noise is its atoms (the replica's sum of S, docs/
    // document_lengths.md) each smoothed by the normal rest
    const bool docs = noise_sd > 0 && !c_.doc_x.empty();
    const double sd =
        docs ? documents_sd(noise_sd) : std::sqrt(noise_sd * noise_sd + hx * hx / 12.0);
    const double span = docs ? c_.doc_span : 0.0;
    // x_i - x_j = (x_.lo - x0) + (i - j) hx; kernel over k = i - j in [-(kw-1), n-1]
    const double off = x_.lo - x0;
    // atoms more than 7.5 sd away count as fully above / below: Phi(-7.5) = 3e-14 of their mass,
    // i.e. < d * 3e-14 on F^d (3e-11 at d = 1024 replicas), far below any reported quantile
    const int reach = static_cast<int>(std::ceil((7.5 * sd + span) / hx)) + 1;
    std::vector<double> above(kw + 1, 0.0);
    for (int j = kw - 1; j >= 0; --j) above[j] = above[j + 1] + pj[j];
    const int kmin = -(kw - 1);
    const int kshift = static_cast<int>(std::floor(off / hx));
    const int klen = x_.n + kw - 1;
    // kernel reversed so that the inner product runs forward in both arrays (vectorizes):
    // kernel[k - kmin] = rev[klen - 1 - (k - kmin)]; types with the same offset share it
    if (!(off == kern_off_ && sd == kern_sd_ && klen == kern_len_ && reach == kern_reach_ &&
          docs == kern_docs_)) {
        kern_docs_ = docs;
        kern_off_ = off;
        kern_sd_ = sd;
        kern_len_ = klen;
        kern_reach_ = reach;
        kern_rev_.assign(static_cast<size_t>(klen), 0.0);
        const int k_lo = std::max(kmin, static_cast<int>(std::floor(-off / hx)) - reach - 2);
        const int k_hi = std::min(x_.n - 1, static_cast<int>(std::ceil(-off / hx)) + reach + 2);
        for (int k = k_lo; k <= k_hi; ++k) {
            const double dx = off + k * hx;
            if (std::fabs(dx) > (reach + 1) * hx) continue;
            kern_rev_[klen - 1 - (k - kmin)] = docs ? documents_sf(dx, sd) : normal_sf(dx / sd);
        }
    }
    const std::vector<double>& rev = kern_rev_;
    // The support of the masses, less a total of 1e-17 at either end (the common W range is
    // wide for one type): such atoms still count through `above` when a whole reach away, and
    // near them the sf is off by at most 1e-17 (a relative 1e-17 d on F^d).
    constexpr double kTrim = 1e-17;
    int jfirst = 0, jlast = kw;
    while (jfirst < kw && above[0] - above[jfirst + 1] <= kTrim) ++jfirst;
    while (jlast > jfirst && above[jlast - 1] <= kTrim) --jlast;
    thread_local std::vector<int> band_lo, band_hi, band_off;
    thread_local std::vector<double> base;
    grow(band_lo, x_.n);
    grow(band_hi, x_.n);
    grow(band_off, x_.n);
    grow(base, x_.n);
    for (int i = 0; i < x_.n; ++i) {
        // atoms with x_i - x_j > reach steps contribute 0, with x_i - x_j < -reach contribute 1
        const int centre = i + kshift;  // j with x_j ~ x_i
        band_lo[i] = std::clamp(centre - reach - 1, jfirst, std::max(jfirst, jlast));
        band_hi[i] = std::clamp(centre + reach + 2, band_lo[i], std::max(band_lo[i], jlast));
        base[i] = sf[i] + above[std::clamp(centre + reach + 2, 0, kw)];
        // kernel[i - j - kmin] = rev[klen - 1 - (i - kmin) + j]
        band_off[i] = klen - 1 - (i - kmin);
    }
    banded_dot(x_.n, band_lo.data(), band_hi.data(), band_off.data(), pj.data(), rev.data(),
               base.data(), sf.data());
}

void replica_sfs(const StepModel& m, const ReplicaSet& set, const ReplicaLaw& law, int clusters,
                 double noise_sd, ReplicaSfs& out) {
    const auto& types = set.types;
    // When a slow unit touches one replica, the PGF's A is linear in the types' CDFs: A =
    // sum_t f_t F_t / F_h = (1 - sf_mix) / F_h with sf_mix the sf of the mixture of types, one
    // convolution instead of one per type.
    out.linear_pgf = set.pgf_mode && !m.lockstep &&
                     std::all_of(set.rep_patterns.begin(), set.rep_patterns.end(),
                                 [](const auto& pat) { return pat.second.size() == 1; });
    out.type.assign(types.size(), {});
    out.type_pers.assign(types.size(), {});
    if (out.linear_pgf) {
        std::vector<std::pair<double, const ReplicaType*>> mix;
        for (const auto& [f, idx] : set.rep_patterns) mix.push_back({f, &types[idx[0]]});
        const ReplicaLaw::MixtureMasses mm = law.mixture_masses(mix);
        out.mix = law.mixture_sf(mm, noise_sd);
        if (clusters > 1) out.mix_pers = law.mixture_sf(mm, 0.0);
    }
    // each type's sf with and without the noise, from its masses once (in PGF mode the
    // scenario counts name the base type only)
    for (size_t t = 0; t < (out.linear_pgf ? 1 : types.size()); ++t) {
        const ReplicaLaw::MixtureMasses mt = law.mixture_masses({{1.0, &types[t]}});
        out.type[t] = law.mixture_sf(mt, noise_sd);
        if (clusters > 1) out.type_pers[t] = law.mixture_sf(mt, 0.0);
    }
}

}  // namespace prism::stochastic::detail::ssta
