#include "src/stochastic/detail/analytic/regime.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <unordered_map>

namespace prism::stochastic::detail::ssta {

namespace {

// probabilists' Gauss-Hermite, 8 nodes (physicists' nodes * sqrt 2, weights / sqrt pi)
constexpr std::array<double, 8> kGhZ{-4.1445471861258945, -2.8024858612875416, -1.6365190424351083,
                                     -0.5390798113513751, 0.5390798113513751,  1.6365190424351083,
                                     2.8024858612875416,  4.1445471861258945};
constexpr std::array<double, 8> kGhW{
    1.1261453837536784e-4, 9.635220120788266e-3, 0.11723990766175913,  0.3730122576790774,
    0.3730122576790774,    0.11723990766175913,  9.635220120788266e-3, 1.1261453837536784e-4};

constexpr int kCells = 96;
constexpr double kZ = 6.0;

/// normal scores of the cell edges and mid-points, and the cells' probabilities (the outermost
/// cells take the tails beyond +-kZ): the same for every point
struct CellGrid {
    std::array<double, kCells + 1> z{};
    std::array<double, kCells> mid{}, w{};
    CellGrid() {
        for (int i = 0; i <= kCells; ++i) z[i] = -kZ + 2.0 * kZ * i / kCells;
        for (int i = 0; i < kCells; ++i) {
            mid[i] = 0.5 * (z[i] + z[i + 1]);
            w[i] = normal_cdf(z[i + 1]) - normal_cdf(z[i]);
        }
        w[0] += normal_cdf(-kZ);
        w[kCells - 1] += normal_cdf(-kZ);
    }
};

/// the regime at the cell edges and mid-points and its mean in each cell: a function of the
/// regime law alone, which a sweep shares across points (cached per thread)
struct RegimeCells {
    std::array<double, kCells + 1> edge{};
    std::array<double, kCells> mid{}, mean{};
};

const RegimeCells& regime_cells_of(const StepModel& m, const CellGrid& grid) {
    thread_local std::unordered_map<std::uint64_t, RegimeCells> regime_cache;
    if (regime_cache.size() > 64) regime_cache.clear();
    auto [slot, fresh] = regime_cache.try_emplace(m.regime_id);
    RegimeCells& rc = slot->second;
    if (fresh) {
        for (int i = 0; i <= kCells; ++i) rc.edge[i] = m.regime.quantile_of_score(grid.z[i]);
        for (int i = 0; i < kCells; ++i) {
            rc.mid[i] = m.regime.quantile_of_score(grid.mid[i]);
            // the outer cells take the tails beyond +-kZ
            const double z1 = i == 0 ? -HUGE_VAL : grid.z[i];
            const double z2 = i == kCells - 1 ? HUGE_VAL : grid.z[i + 1];
            rc.mean[i] = m.regime.partial_mean_of_scores(z1, z2) / grid.w[i];
        }
    }
    return rc;
}

/// The law of the routing's shared factor S (routing.hpp SharedDrift) and its mean: a gamma of
/// S's sd and skewness shifted to mean 1 (skewness at least 0.05; below, a normal).
std::pair<Distribution, double> shared_law(const SharedDrift& d) {
    DistributionSpec spec;
    if (d.skew >= 0.05) {
        // G gamma of cv = skew / 2 and sd = S's: S = 1 + G - E[G]
        spec.kind = DistKind::gamma;
        spec.cv = 0.5 * d.skew;
        spec.mean = d.sd / spec.cv;
    } else {
        spec.kind = DistKind::normal;
        spec.mean = 1.0;
        spec.cv = d.sd;
    }
    return {Distribution(spec), spec.mean};
}

/// The tail's two parts at regime value r: the sync's mean and sd, the optimizer's mean and sd
/// (with the routing's shared variance on it); one pass over each chunk.
struct TailParts {
    double sm, ssd, om, osd;
};
TailParts tail_parts(const StepModel& m, double r, double shared_var) {
    const Moments sync = m.sync.moments(1.0, r), opt = m.optimizer.moments(1.0, r);
    return {sync.mean, std::sqrt(sync.var), opt.mean, std::sqrt(opt.var + shared_var)};
}

/// Whether the tail at regime value r is one normal (no rectification in reach: the sync
/// exposed or hidden by more than 6 sd, the optimizer positive), and its sd; -1 if not.
double tail_normal_sd(const StepModel& m, double r, double shared_var) {
    const auto [sm, ssd, om, osd] = tail_parts(m, r, shared_var);
    if (!(om > 6.0 * osd)) return -1;
    if (!(ssd > 0)) return osd;  // a constant sync (none without DP)
    if (sm - m.sync_overlap_s > 6.0 * ssd) return std::sqrt(ssd * ssd + osd * osd);
    if (sm - m.sync_overlap_s < -6.0 * ssd) return osd;
    return -1;
}

/// A tail normal of sd at least 1/rho of what smooths it is folded into D: 8 Gauss-Hermite
/// atoms smoothed by a normal of rho times their sd are off by at most 1.7e-5 in the CDF at
/// rho = 1 (5e-4 at 0.7, 0.013 at 0.4).
constexpr double kFoldRatio = 1.0;

/// The sd to fold into D (regime.hpp): the smallest of the cells' tail sd when every cell's
/// tail is one normal and it exceeds the sd of what smooths the Gauss-Hermite atoms, D and
/// the regime's shift across the cells (their means' spread, a lower bound); else 0.
double folded_tail_sd(const StepModel& m, const std::vector<Cell>& cells,
                      const std::vector<double>& r_of_cell, double d_sd, double shared_var) {
    // the tail's sd is at most the sync's and optimizer's at the largest R (the sync's
    // variance grows with R): most points stop here, D being wider than that
    const double r_max = *std::max_element(r_of_cell.begin(), r_of_cell.end());
    const double sd_max =
        std::sqrt(m.sync.var(1.0, r_max) + m.optimizer.var(1.0, r_max) + shared_var);
    if (!(d_sd < kFoldRatio * sd_max)) return 0;
    double sd_lo = HUGE_VAL;
    for (double r : r_of_cell) {
        const double sd = tail_normal_sd(m, r, shared_var);
        if (!(sd > 0)) return 0;
        sd_lo = std::min(sd_lo, sd);
    }
    double m1 = 0, m2 = 0;
    for (const auto& c : cells) m1 += c.w * c.shift_mean;
    for (const auto& c : cells) m2 += c.w * (c.shift_mean - m1) * (c.shift_mean - m1);
    const double smooth_sd = std::sqrt(d_sd * d_sd + m2);
    return smooth_sd < kFoldRatio * sd_lo ? sd_lo : 0.0;
}

/// Appends the tail nodes (value, weight) for regime value r to `nodes`; returns how many, and
/// in tail_var the variance of the normal parts collapsed onto their means. `folded_var` (only
/// where the tail is one normal) is taken out of the normal part's variance: D carries it.
std::size_t tail_nodes(const StepModel& m, double r, double collapse_sd, double folded_var,
                       double shared_var, std::vector<std::pair<double, double>>& nodes,
                       double& tail_var) {
    const size_t first = nodes.size();
    tail_var = 0;
    auto node_count = [&](double sd) {
        if (!(sd > 0)) return 1;
        if (sd < collapse_sd) {
            tail_var += sd * sd;
            return 1;
        }
        return 8;
    };
    // the routing's shared drift (a normal with a random regime: regime.hpp) rides on the
    // optimizer's normal part, which is never rectified where it is in reach
    const auto [sm, ssd, om, osd] = tail_parts(m, r, shared_var);
    if (sm - m.sync_overlap_s > 6.0 * ssd && om > 6.0 * osd) {
        // no rectification in reach: the sum of two normals is normal
        const double sd = folded_var > 0
                              ? std::sqrt(std::max(0.0, ssd * ssd + osd * osd - folded_var))
                              : std::sqrt(ssd * ssd + osd * osd);
        const int n = node_count(sd);
        for (int a = 0; a < n; ++a) {
            const double z = n > 1 ? kGhZ[a] : 0.0;
            nodes.push_back({sm - m.sync_overlap_s + om + sd * z, n > 1 ? kGhW[a] : 1.0});
        }
        return nodes.size() - first;
    }
    if (sm - m.sync_overlap_s < -6.0 * ssd && om > 6.0 * osd) {
        // the sync stays hidden
        const double sd = folded_var > 0 ? std::sqrt(std::max(0.0, osd * osd - folded_var)) : osd;
        const int n = node_count(sd);
        for (int a = 0; a < n; ++a) {
            nodes.push_back({om + sd * (n > 1 ? kGhZ[a] : 0.0), n > 1 ? kGhW[a] : 1.0});
        }
        return nodes.size() - first;
    }
    // (a folded part only with a constant sync: tail_normal_sd)
    const int ns = ssd > 0 ? 8 : 1;
    const double osd_left = folded_var > 0 ? std::sqrt(std::max(0.0, osd * osd - folded_var)) : osd;
    const int no = om > 6.0 * osd ? node_count(osd_left) : (osd > 0 ? 8 : 1);
    for (int a = 0; a < ns; ++a) {
        for (int b = 0; b < no; ++b) {
            const double s = ns > 1 ? sm + ssd * kGhZ[a] : sm;
            const double o = no > 1 ? om + osd_left * kGhZ[b] : om;
            const double w = (ns > 1 ? kGhW[a] : 1.0) * (no > 1 ? kGhW[b] : 1.0);
            nodes.push_back({std::max(0.0, s - m.sync_overlap_s) + std::max(0.0, o), w});
        }
    }
    return nodes.size() - first;
}

/// shift[i] = the mean-duration makespan at g = 1 and R = rs[i]. It is a longest path, a max of
/// functions affine in R with non-negative slopes: convex in R. A convex function that meets
/// its chord at an interior point is affine on the whole interval (and within 2 tol of it if
/// within tol of the chord there), so intervals are split only where the critical path
/// changes: a few DAG runs instead of one per cell edge.
void regime_shifts(const StepModel& m, const StageCurves& c,
                   const std::array<double, kCells + 1>& rs,
                   std::array<double, kCells + 1>& shift) {
    // the ends and the middle in one pass (the first split's three DAG runs)
    {
        const std::array<double, 3> r3{rs[0], rs[kCells / 2], rs[kCells]};
        std::array<double, 3> s3{};
        makespans_at(m, c, r3.data(), 3, s3.data());
        shift[0] = s3[0];
        shift[kCells / 2] = s3[1];
        shift[kCells] = s3[2];
    }
    auto fill = [&](auto&& self, int a, int b) -> void {
        if (b - a < 2) return;
        const int mid = (a + b) / 2;
        if (!(a == 0 && b == kCells)) shift[mid] = makespan_at(m, c, rs[mid]);
        const double f = (rs[mid] - rs[a]) / (rs[b] - rs[a]);
        const double chord = shift[a] + f * (shift[b] - shift[a]);
        if (std::fabs(shift[mid] - chord) <= 1e-12 * std::fabs(shift[mid]) && rs[b] > rs[a]) {
            for (int i = a + 1; i < b; ++i) {
                if (i == mid) continue;
                const double fi = (rs[i] - rs[a]) / (rs[b] - rs[a]);
                shift[i] = shift[a] + fi * (shift[b] - shift[a]);
            }
            return;
        }
        self(self, a, mid);
        self(self, mid, b);
    };
    fill(fill, 0, kCells);
}

}  // namespace

RegimePart regime_cells(const StepModel& m, const StageCurves& c, double d_sd, double grid_h) {
    // the cells (weight and shift) and their regime values, then the tail nodes
    RegimePart out;
    std::vector<Cell>& cells = out.cells;
    thread_local std::vector<double> r_of_cell;
    r_of_cell.clear();
    const bool shared = m.routing_shared.active() && m.routing_shared_s > 0;
    const double shared_sd = shared ? m.routing_shared.sd * m.routing_shared_s : 0.0;
    double shared_var = 0;  // the shared drift as a normal in the tail (random regime)
    if (shared && m.regime.is_constant()) {
        // the cells of S: (S - 1) routing_shared_s on S's quantile cells, the regime's shift
        // at its one value
        static const CellGrid grid;
        const double r = m.regime.mean();
        const double s0 = makespan_at(m, c, r);
        const auto [law, law_mean] = shared_law(m.routing_shared);
        const double k = m.routing_shared_s;
        std::array<double, kCells + 1> shift{};
        for (int i = 0; i <= kCells; ++i) {
            // S = E[Z | w] / E[Z] cannot pass capacity / E[Z] (every op capped): the law's
            // mass above it is the atom there
            const double sq = law.quantile_of_score(grid.z[i]) - law_mean + 1.0;
            shift[i] = s0 + k * (std::min(sq, m.routing_shared.max_factor) - 1.0);
        }
        cells.reserve(kCells);
        for (int i = 0; i < kCells; ++i) {
            const double z1 = i == 0 ? -HUGE_VAL : grid.z[i];
            const double z2 = i == kCells - 1 ? HUGE_VAL : grid.z[i + 1];
            const double mean =
                std::clamp(s0 + k * (law.partial_mean_of_scores(z1, z2) / grid.w[i] - law_mean),
                           shift[i], shift[i + 1]);
            const double half = 0.5 * (shift[i + 1] - shift[i]);
            const double hi_mean = 0.5 * (0.5 * (shift[i] + shift[i + 1]) + shift[i + 1]);
            const double lo_share = half > 0 ? std::clamp((hi_mean - mean) / half, 0.0, 1.0) : 0.5;
            cells.push_back({grid.w[i], shift[i], shift[i + 1], mean, lo_share, {}, 0.0, 0, 0});
            r_of_cell.push_back(r);
        }
    } else if (m.regime.is_constant()) {
        const double r = m.regime.mean();
        const double s = makespan_at(m, c, r);
        cells.push_back({1.0, s, s, s, 0.5, {}, 0.0, 0, 0});
        r_of_cell.push_back(r);
    } else {
        static const CellGrid grid;
        const RegimeCells& rc = regime_cells_of(m, grid);
        const std::array<double, kCells + 1>& rs = rc.edge;
        std::array<double, kCells + 1> shift{};
        regime_shifts(m, c, rs, shift);
        cells.reserve(kCells);
        for (int i = 0; i < kCells; ++i) {
            // the cell's mean of R mapped through the shift, affine in R inside the cell
            const double r_mean = rc.mean[i];
            double mean = 0.5 * (shift[i] + shift[i + 1]);
            if (rs[i + 1] > rs[i]) {
                mean =
                    shift[i] + (r_mean - rs[i]) / (rs[i + 1] - rs[i]) * (shift[i + 1] - shift[i]);
                mean = std::clamp(mean, std::min(shift[i], shift[i + 1]),
                                  std::max(shift[i], shift[i + 1]));
            }
            // the shift is non-decreasing in R: shift[i] <= shift[i + 1]
            const double half = 0.5 * (shift[i + 1] - shift[i]);
            const double hi_mean = 0.5 * (0.5 * (shift[i] + shift[i + 1]) + shift[i + 1]);
            const double lo_share = half > 0 ? std::clamp((hi_mean - mean) / half, 0.0, 1.0) : 0.5;
            cells.push_back({grid.w[i], shift[i], shift[i + 1], mean, lo_share, {}, 0.0, 0, 0});
            r_of_cell.push_back(rc.mid[i]);
        }
        shared_var = shared_sd * shared_sd;
    }
    out.folded_sd = folded_tail_sd(m, cells, r_of_cell, d_sd, shared_var);
    const double folded_var = out.folded_sd * out.folded_sd;
    const double collapse_sd = std::max(
        0.05 * grid_h, 0.02 * (out.folded_sd > 0 ? std::sqrt(d_sd * d_sd + folded_var) : d_sd));
    thread_local std::vector<std::pair<double, double>> node_store;
    node_store.clear();
    for (size_t i = 0; i < cells.size(); ++i) {
        Cell& cell = cells[i];
        cell.first = node_store.size();
        cell.count = tail_nodes(m, r_of_cell[i], collapse_sd, folded_var, shared_var, node_store,
                                cell.tail_var);
    }
    for (auto& cell : cells) cell.tail = {node_store.data() + cell.first, cell.count};
    return out;
}

}  // namespace prism::stochastic::detail::ssta
