#include "src/stochastic/detail/analytic/step_cdf.hpp"

#include <algorithm>
#include <cmath>

#include "src/stochastic/detail/kernels.hpp"
#include "src/stochastic/distribution.hpp"

namespace prism::stochastic::detail::ssta {

namespace {

constexpr int kMaxLattice = 4096;

/// Point masses on a lattice of nv points (in lattice units u >= 0): atoms split between their
/// two lattice neighbours keeping their mean, uniform smears cut at the lattice points with
/// each piece's mass at its centroid. A whole lattice interval [k, k + 1] puts half its mass
/// on each end, the same for every one of a smear's whole intervals: they go into a difference
/// array (summed once by masses()), so that a smear costs O(1), not its length (a regime spread
/// over thousands of lattice steps). With kTrack, added_var() is the variance the masses have
/// beyond what was put (lattice units^2): a piece of mass m split at fraction f adds m f (1 - f)
/// and loses its own spread (len^2 / 12), a whole interval adds 1/4 - 1/12 of its mass.
template <bool kTrack>
class LatticeMasses {
  public:
    explicit LatticeMasses(int nv) : nv_(nv), mass_(nv, 0.0), halves_(nv + 1, 0.0) {}

    void add_atom(double u, double w) {
        const int k = std::min(static_cast<int>(u), nv_ - 2);  // u >= 0: truncation = floor
        const double f = std::min(1.0, u - k);
        mass_[k] += w * (1.0 - f);
        mass_[k + 1] += w * f;
        if constexpr (kTrack) added_var_ += w * f * (1.0 - f);
    }
    double added_var() const { return added_var_; }
    /// a uniform smear of mass w over [ua, ub]
    void add_smear(double ua, double ub, double w) {
        if (!(w > 0)) return;
        if (!(ub - ua > 1e-9)) {
            add_atom(0.5 * (ua + ub), w);
            return;
        }
        const double dens = w / (ub - ua);
        auto piece = [&](int k, double lo, double hi) {
            const double m = dens * (hi - lo);
            const double f = std::clamp(0.5 * (lo + hi) - k, 0.0, 1.0);
            mass_[k] += m * (1.0 - f);
            mass_[k + 1] += m * f;
            if constexpr (kTrack) added_var_ += m * (f * (1.0 - f) - (hi - lo) * (hi - lo) / 12.0);
        };
        const int k0 = std::min(static_cast<int>(ua), nv_ - 2);
        const double e0 = std::min(ub, static_cast<double>(k0 + 1));
        piece(k0, ua, e0);
        if (!(ub > e0)) return;
        // whole intervals k1 <= k < k2, then the piece [k2, ub]
        const int k1 = k0 + 1;
        const int k2 = std::clamp(static_cast<int>(ub), k1, nv_ - 2);
        if (k2 > k1) {
            const double half = 0.5 * dens;
            halves_[k1] += half;  // mass[k], k1 <= k < k2
            halves_[k2] -= half;
            halves_[k1 + 1] += half;  // mass[k + 1]
            halves_[k2 + 1] -= half;
            if constexpr (kTrack) added_var_ += (k2 - k1) * dens / 6.0;
        }
        if (ub > k2) piece(k2, k2, ub);
    }
    /// the masses, the whole intervals' halves summed in
    std::vector<double>& masses() {
        double run = 0;
        for (int k = 0; k < nv_; ++k) {
            run += halves_[k];
            mass_[k] = std::max(0.0, mass_[k] + run);
        }
        return mass_;
    }

  private:
    int nv_;
    double added_var_ = 0;
    std::vector<double> mass_, halves_;
};

/// V = shift(R) + tail(R) as masses on the lattice of step hl from v_lo, nv points; with
/// kTrack, in added_var the variance the lattice adds (lattice units^2).
template <bool kTrack>
std::vector<double> regime_masses(const std::vector<Cell>& cells, double v_lo, double hl, int nv,
                                  double& added_var) {
    LatticeMasses<kTrack> lattice(nv);
    // in lattice units u = (t - v_lo) / hl, all pieces lie in [0, span], span <= nv - 2
    const double inv_hl = 1.0 / hl;
    for (const auto& c : cells) {
        const double a0 = std::min(c.shift_a, c.shift_b);
        const double b0 = std::max(c.shift_a, c.shift_b);
        // two uniform halves weighted to keep the cell's mean shift
        const double mid = 0.5 * (a0 + b0);
        const double frac_lo = c.lo_share;
        for (const auto& [y, wy] : c.tail) {
            const double w = c.w * wy;
            const double ua = std::max(0.0, (a0 + y - v_lo) * inv_hl);
            const double um = std::max(ua, (mid + y - v_lo) * inv_hl);
            const double ub = std::max(um, (b0 + y - v_lo) * inv_hl);
            lattice.add_smear(ua, um, w * frac_lo);
            lattice.add_smear(um, ub, w * (1.0 - frac_lo));
        }
    }
    added_var = lattice.added_var();
    return std::move(lattice.masses());
}

/// F_step[i] = sum_k mass[k] F_D(i - k), F_D given on the lattice as fl (0 below, 1 above).
std::vector<double> convolve_with_fd(const std::vector<double>& mass,
                                     const std::vector<double>& fl) {
    const int nv = static_cast<int>(mass.size());
    const int nx = static_cast<int>(fl.size());
    const int nt = nx + nv - 1;
    std::vector<double> below(nv + 1, 0.0);  // below[k] = mass[0] + ... + mass[k - 1]
    for (int k = 0; k < nv; ++k) below[k + 1] = below[k] + mass[k];
    std::vector<double> rd(fl.rbegin(), fl.rend());  // rd[j] = fl[nx - 1 - j]
    // F_D is 0 below ja and taken as 1 from jb on (it is within 1e-15 of 1 there)
    int ja = 0, jb = nx;
    while (ja < nx && fl[ja] <= 0) ++ja;
    while (jb > ja && fl[jb - 1] >= 1.0 - 1e-15) --jb;
    std::vector<double> step_cdf(nt);
    thread_local std::vector<int> lo, hi, off;
    thread_local std::vector<double> base;
    grow(lo, nt);
    grow(hi, nt);
    grow(off, nt);
    grow(base, nt);
    for (int i = 0; i < nt; ++i) {
        // F_D[i - k] is 1 for k <= i - jb and 0 for k > i - ja
        lo[i] = std::max(0, i - jb + 1);
        hi[i] = std::max(lo[i], std::min(nv - 1, i - ja) + 1);
        base[i] = below[std::clamp(lo[i], 0, nv)];
        off[i] = nx - 1 - i;  // rd[off + k] = fl[i - k]
    }
    banded_dot(nt, lo.data(), hi.data(), off.data(), mass.data(), rd.data(), base.data(),
               step_cdf.data());
    for (double& f : step_cdf) f = std::clamp(f, 0.0, 1.0);
    for (int i = 1; i < nt; ++i) step_cdf[i] = std::max(step_cdf[i], step_cdf[i - 1]);
    return step_cdf;
}

}  // namespace

StepCdf::StepCdf(const RegimePart& regime, const std::vector<double>& FD, const Grid& x,
                 double d_mean) {
    double v_lo = 1e300, v_hi = -1e300;
    for (const auto& c : regime.cells) {
        for (const auto& [y, wy] : c.tail) {
            v_lo = std::min(v_lo, std::min(c.shift_a, c.shift_b) + y);
            v_hi = std::max(v_hi, std::max(c.shift_a, c.shift_b) + y);
        }
    }
    if (regime.folded_sd > 0) {
        folded_lattice(regime.cells, regime.folded_sd, FD, x, v_lo, v_hi);
    } else {
        plain_lattice(regime.cells, FD, x, d_mean, v_lo, v_hi);
    }
    // Between lattice points the CDF is the monotone cubic (Fritsch-Carlson) interpolant: on a
    // 257-point grid linear interpolation is off by ~5e-5 of the step in the tail quantiles of
    // a smooth CDF, the cubic by < 2e-6 (tests: exact order statistics).
    const int nt = static_cast<int>(F_.size());
    slope_.assign(nt, 0.0);  // dF / di at lattice points
    for (int i = 0; i < nt; ++i) {
        const double dl = i > 0 ? F_[i] - F_[i - 1] : -1.0;
        const double dr = i + 1 < nt ? F_[i + 1] - F_[i] : -1.0;
        if (dl < 0) {
            slope_[i] = std::max(0.0, dr);
        } else if (dr < 0) {
            slope_[i] = dl;
        } else {
            slope_[i] = dl > 0 && dr > 0 ? 2.0 / (1.0 / dl + 1.0 / dr) : 0.0;
        }
    }
}

void StepCdf::plain_lattice(const std::vector<Cell>& cells, const std::vector<double>& FD,
                            const Grid& x, double d_mean, double v_lo, double v_hi) {
    // The step's CDF on a lattice: V = shift(R) + tail(R) is put on a lattice of step hl as
    // point masses (a uniform cell smear cut at the lattice points, each piece's mass split
    // between its two lattice neighbours so that its mean is kept: for an atom this is exactly
    // linear interpolation of F_D), then F_step[i] = sum_k mass[k] F_D(i - k). hl is the x
    // grid's step h, or when V spreads over more than kMaxLattice such steps (D narrow against
    // the regime's spread, e.g. without persistent variability) the multiple r h that keeps it
    // within kMaxLattice, F_D read at every r-th grid point: the error is second order in hl
    // against the wider of D and V (hl is at most 1/4096 of V's range).
    // stride: F_D read at every stride-th grid point; 0 when D fits in one lattice step, then a
    // uniform over one step around D's mean (e.g. D an atom: no persistent variability and one
    // replica's noise ~1e-12 wide)
    int stride = 1;
    double hl = x.h;
    double d_lo = x.lo;  // where F_D's lattice starts
    if (const double steps = (v_hi - v_lo) / x.h; !(steps <= kMaxLattice)) {
        const double r = std::ceil(steps / kMaxLattice);
        if (r < x.n - 1) {
            stride = static_cast<int>(r);
            hl = stride * x.h;
        } else {
            stride = 0;
            hl = (v_hi - v_lo) / kMaxLattice;
            d_lo = d_mean - 0.5 * hl;
        }
    }
    const double span = (v_hi - v_lo) / hl;
    const int nv = static_cast<int>(std::ceil(span)) + 2;
    double unused = 0;
    const std::vector<double> mass = regime_masses<false>(cells, v_lo, hl, nv, unused);
    // F_D on the lattice: every stride-th grid point, then 1 (F_D's last value is within 1e-15
    // of 1)
    const int nx = stride > 0 ? (x.n - 1 + stride - 1) / stride + 1 : 2;
    std::vector<double> fl(nx);  // F_D at d_lo + j hl
    for (int j = 0; j < nx; ++j) {
        const int g = j * stride;
        fl[j] = stride == 0 ? static_cast<double>(j) : g < x.n ? FD[g] : 1.0;
    }
    t0_ = d_lo + v_lo;
    hl_ = hl;
    F_ = convolve_with_fd(mass, fl);
}

void StepCdf::folded_lattice(const std::vector<Cell>& cells, double sigma,
                             const std::vector<double>& FD, const Grid& x, double v_lo,
                             double v_hi) {
    // D + N(0, sigma^2) with sigma wider than D (regime.hpp): the lattice step is sigma / 16 (or
    // V's or D's range over kMaxLattice), D's grid cells are atoms at their midpoints split
    // onto it, and the normal's CDF is sampled at the lattice offsets: F_D'(lattice i) =
    // sum_k q_k Phi((i - k) hl / sigma_e), one banded convolution. sigma_e^2 = sigma^2 less the
    // variance the splits of D and V add, so that the step's variance is kept; what is left is
    // of fourth order in hl / sigma.
    constexpr double kStepsPerSd = 16;
    constexpr double kNormalReach = 8.5;  // Phi(-8.5) = 1e-17
    const double hl =
        std::max({sigma / kStepsPerSd, (v_hi - v_lo) / kMaxLattice, (x.hi - x.lo) / kMaxLattice});
    // D's masses on the lattice from x.lo: what is at or below x.lo, each grid cell's at its
    // midpoint, what is above x.hi
    const int nq = static_cast<int>((x.hi - x.lo) / hl) + 3;
    LatticeMasses<true> dl(nq);
    const double cell_u = x.h / hl;
    dl.add_atom(0.0, std::max(0.0, FD[0]));
    double inside = 0;
    for (int j = 1; j < x.n; ++j) {
        const double p = std::max(0.0, FD[j] - FD[j - 1]);
        dl.add_atom((j - 0.5) * cell_u, p);
        inside += p;
    }
    dl.add_atom((x.n - 1) * cell_u, std::max(0.0, 1.0 - FD[x.n - 1]));
    const double d_added = dl.added_var() - inside * cell_u * cell_u / 12.0;
    const double span = (v_hi - v_lo) / hl;
    const int nv = static_cast<int>(std::ceil(span)) + 2;
    double v_added = 0;
    const std::vector<double> mass = regime_masses<true>(cells, v_lo, hl, nv, v_added);
    const double var_e = std::max(0.25, 1.0 - (d_added + v_added) * hl * hl / (sigma * sigma));
    const double sigma_e = sigma * std::sqrt(var_e);
    const int reach = static_cast<int>(std::ceil(kNormalReach * sigma_e / hl));
    std::vector<double> kernel(2 * reach + 1);  // Phi at lattice offsets -reach .. reach
    for (int i = 0; i <= 2 * reach; ++i) kernel[i] = normal_cdf((i - reach) * hl / sigma_e);
    const std::vector<double> fd = convolve_with_fd(dl.masses(), kernel);
    t0_ = x.lo - reach * hl + v_lo;
    hl_ = hl;
    F_ = convolve_with_fd(mass, fd);
}

double StepCdf::cdf(double t) const {
    const int nt = static_cast<int>(F_.size());
    const double u = (t - t0_) / hl_;
    if (u <= 0) return F_.front() * std::max(0.0, 1.0 + u);
    if (u >= nt - 1) return 1.0;
    const int i = static_cast<int>(u);
    return std::clamp(hermite(i, u - i), F_[i], F_[i + 1]);
}

double StepCdf::quantile(double prob) const {
    // the lattice CDF is non-decreasing: find the lattice cell, then invert the cubic there
    const auto it = std::lower_bound(F_.begin(), F_.end(), prob);
    if (it == F_.begin()) return t0_;
    if (it == F_.end()) return t0_ + hl_ * static_cast<double>(F_.size() - 1);
    const auto i = static_cast<int>(it - F_.begin()) - 1;
    // the interpolant is monotone in the cell: bisection to 2^-40 of a lattice step
    double a = 0, b = 1;
    for (int k = 0; k < 40; ++k) {
        const double mid = 0.5 * (a + b);
        (hermite(i, mid) < prob ? a : b) = mid;
    }
    return t0_ + hl_ * (static_cast<double>(i) + 0.5 * (a + b));
}

void step_moments(const std::vector<Cell>& cells, double d_mean, double d_var, double& mean_s,
                  double& std_s) {
    // step = shift(R) + D + tail(R), D independent of (R, tail)
    double m1 = 0, m2 = 0;
    for (const auto& c : cells) {
        double ty = 0, ty2 = 0;
        for (const auto& [y, wy] : c.tail) {
            ty += wy * y;
            ty2 += wy * y * y;
        }
        // the cell as two uniform halves weighted to its mean (as on the lattice)
        const double sh = c.shift_mean;
        const double width = std::fabs(c.shift_b - c.shift_a);
        const double lo_mean = std::min(c.shift_a, c.shift_b) + 0.25 * width;
        const double hi_mean = lo_mean + 0.5 * width;
        const double f_lo = c.lo_share;
        const double shv = width * width / 48.0 + f_lo * (lo_mean - sh) * (lo_mean - sh) +
                           (1.0 - f_lo) * (hi_mean - sh) * (hi_mean - sh);
        m1 += c.w * (sh + ty);
        m2 += c.w * (sh * sh + shv + 2 * sh * ty + ty2 + c.tail_var);
    }
    mean_s = m1 + d_mean;
    std_s = std::sqrt(std::max(0.0, m2 - m1 * m1) + d_var);
}

}  // namespace prism::stochastic::detail::ssta
