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

/// Appends the tail nodes (value, weight) for regime value r to `nodes`; returns how many, and
/// in tail_var the variance of the normal parts collapsed onto their means.
std::size_t tail_nodes(const StepModel& m, double r, double collapse_sd,
                       std::vector<std::pair<double, double>>& nodes, double& tail_var) {
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
    const double sm = m.sync.mean(1.0, r), ssd = std::sqrt(m.sync.var(1.0, r));
    const double om = m.optimizer.mean(1.0, r), osd = std::sqrt(m.optimizer.var(1.0, r));
    if (sm - m.sync_overlap_s > 6.0 * ssd && om > 6.0 * osd) {
        // no rectification in reach: the sum of two normals is normal
        const double sd = std::sqrt(ssd * ssd + osd * osd);
        const int n = node_count(sd);
        for (int a = 0; a < n; ++a) {
            const double z = n > 1 ? kGhZ[a] : 0.0;
            nodes.push_back({sm - m.sync_overlap_s + om + sd * z, n > 1 ? kGhW[a] : 1.0});
        }
        return nodes.size() - first;
    }
    if (sm - m.sync_overlap_s < -6.0 * ssd && om > 6.0 * osd) {
        // the sync stays hidden
        const int n = node_count(osd);
        for (int a = 0; a < n; ++a) {
            nodes.push_back({om + osd * (n > 1 ? kGhZ[a] : 0.0), n > 1 ? kGhW[a] : 1.0});
        }
        return nodes.size() - first;
    }
    const int ns = ssd > 0 ? 8 : 1;
    const int no = om > 6.0 * osd ? node_count(osd) : (osd > 0 ? 8 : 1);
    for (int a = 0; a < ns; ++a) {
        for (int b = 0; b < no; ++b) {
            const double s = ns > 1 ? sm + ssd * kGhZ[a] : sm;
            const double o = no > 1 ? om + osd * kGhZ[b] : om;
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

std::vector<Cell> regime_cells(const StepModel& m, const StageCurves& c, double collapse_sd) {
    thread_local std::vector<std::pair<double, double>> node_store;
    node_store.clear();
    double tail_var = 0;
    std::vector<Cell> cells;
    if (m.regime.is_constant()) {
        const double r = m.regime.mean();
        const double s = makespan_at(m, c, r);
        const size_t first = node_store.size();
        const size_t count = tail_nodes(m, r, collapse_sd, node_store, tail_var);
        cells.push_back({1.0, s, s, s, 0.5, {}, tail_var, first, count});
    } else {
        static const CellGrid grid;
        const RegimeCells& rc = regime_cells_of(m, grid);
        const std::array<double, kCells + 1>& rs = rc.edge;
        std::array<double, kCells + 1> shift{};
        regime_shifts(m, c, rs, shift);
        cells.reserve(kCells);
        for (int i = 0; i < kCells; ++i) {
            const double rmid = rc.mid[i];
            const size_t first = node_store.size();
            const size_t count = tail_nodes(m, rmid, collapse_sd, node_store, tail_var);
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
            cells.push_back(
                {grid.w[i], shift[i], shift[i + 1], mean, lo_share, {}, tail_var, first, count});
        }
    }
    for (auto& cell : cells) cell.tail = {node_store.data() + cell.first, cell.count};
    return cells;
}

}  // namespace prism::stochastic::detail::ssta
