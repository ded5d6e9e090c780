#pragma once

// Persistent factors of one cluster realization: which GPUs (and slow units: nodes or GPUs) each
// TP x CP group lands on under a placement, and the resulting group factors g.
//
// Placement semantics (DesignPoint::placement):
//  * ordered: rank coordinates (tp, cp, pp, dp) are laid onto consecutive GPUs of the machine,
//    innermost dimension first, using the first N GPUs;
//  * random (node-random, as a scheduler allocates): the job's units (nodes, or GPUs when slow
//    units are GPUs) are a uniformly random set of the machine's, in random order, and the ranks
//    are laid onto them as ordered placement lays them onto the first units. The slow units
//    being independent of the draw, the job's units are then slow independently with
//    probability q, as under ordered placement: the same law of the group factors (the analytic
//    evaluator and LazyGroupFactors take ordered placement's; draw_group_factors draws the
//    machine and the scheduler's choice explicitly);
//  * variability_aware: knowing which units are slow, healthy units are used first (a machine
//    larger than the job, ClusterSpec::total_gpus > N, leaves slow units out); slow GPUs that
//    must be used are packed into as few TP x CP groups as possible, placed on the stage with
//    the least work, one group per replica before a second stage is used.

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/stochastic/detail/step_model.hpp"
#include "src/stochastic/random.hpp"

namespace prism::stochastic::detail {

struct PersistentLayout {
    PlacementKind kind = PlacementKind::ordered;
    int stages = 1, dp = 1, group_gpus = 1, unit_gpus = 1;
    std::int64_t job_gpus = 1;
    std::int64_t machine_units = 1;
    std::int64_t job_units = 1;
    /// ordered GPU index of member j of group gi = s * dp + r: gpu_of[gi * group_gpus + j]
    std::vector<std::int32_t> gpu_of;
    /// group indices in variability-aware preference order
    std::vector<std::int32_t> preference;
};

PersistentLayout make_layout(const StepModel& model, const DesignPoint& point,
                             const HardwareSpec& hw, const ClusterSpec& cluster);

/// Draws one cluster realization: g for every group (index s * dp + r). With lockstep, the
/// caller takes the max over replicas per stage.
void draw_group_factors(const StepModel& model, const PersistentLayout& layout, Stream& stream,
                        std::vector<double>& g, std::vector<int>* slow_members = nullptr);

/// Indices (ascending) of the slow units among [0, units), each slow independently with
/// probability q: geometric skipping, the number of healthy units before the next slow one is
/// floor(ln U / ln(1 - q)), exactly Geometric(q), so about q * units + 1 draws instead of units.
/// Returns the count; `out` (if not null) receives the indices.
std::int64_t draw_slow_units(double q, std::int64_t units, Stream& stream,
                             std::vector<std::int64_t>* out);

/// H^-1(p) = F_S^-1(p^(1/n)) (the quantile of the max of n iid spatial factors) as a function
/// of ln p, by table: H^-1(e^-y) is smooth in y = -ln p, so on each cell of y (every binade
/// [2^e, 2^(e+1)), 2^-40 <= y < 2^6, cut in kCells equal parts) it is a Chebyshev interpolant
/// of degree kDegree in the power basis, evaluated by Estrin's scheme (IEEE products and sums:
/// the same bits on every instruction set). Each cell is checked on construction against the exact
/// function (Distribution::quantile_upper of -expm1(ln p / n)) at points between its nodes; a cell
/// off by more than kTolerance relative (and every y outside the range, and laws other than normal,
/// lognormal and gamma, whose quantiles are not smooth) falls back to the exact function.
/// Built once per (spatial law, n) and thread (cached): about 13,000 exact evaluations (1.3 ms
/// for a normal law; gamma, by bisection, about 0.2 s).
class HealthyQuantile {
  public:
    HealthyQuantile(const Distribution& spatial, int n);
    /// The table of (spatial law with id `spatial_id` (spec_id), n), shared per thread.
    static std::shared_ptr<const HealthyQuantile> cached(const Distribution& spatial,
                                                         std::uint64_t spatial_id, int n);

    double operator()(double log_p) const {
        const double y = -log_p;
        if (!(y >= kMinY && y < kMaxY)) return exact(log_p);
        const auto bits = std::bit_cast<std::uint64_t>(y);
        const int cell = (static_cast<int>(bits >> 52) - (1023 + kMinExp)) * kCells +
                         static_cast<int>((bits >> (52 - kCellBits)) & (kCells - 1));
        if (!ok_[cell]) return exact(log_p);
        // y / 2^e in [1, 2), and its offset from the cell's centre scaled to [-1, 1] (exact)
        const double f =
            std::bit_cast<double>((bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
        const double t = (f - centre_[cell & (kCells - 1)]) * (2.0 * kCells);
        return estrin(coef_.data() + static_cast<size_t>(cell) * (kDegree + 1), t);
    }
    /// sum_k c[k] t^k by Estrin's scheme (pairs, then pairs of pairs: a short dependency chain).
    static double estrin(const double* c, double t) {
        static_assert(kDegree == 11, "written out for 12 coefficients");
        const double t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
        const double a0 = c[0] + t * c[1], a1 = c[2] + t * c[3], a2 = c[4] + t * c[5];
        const double a3 = c[6] + t * c[7], a4 = c[8] + t * c[9], a5 = c[10] + t * c[11];
        const double b0 = a0 + t2 * a1, b1 = a2 + t2 * a3, b2 = a4 + t2 * a5;
        return (b0 + t4 * b1) + t8 * b2;
    }
    /// The exact function.
    double exact(double log_p) const;
    static double exact_of(const Distribution& spatial, int n, double log_p);
    /// Largest relative error found by the checks over the cells kept; cells kept.
    double max_rel_error() const { return max_err_; }
    int cells_kept() const;

    static constexpr int kMinExp = -40, kMaxExp = 6;  ///< y in [2^kMinExp, 2^kMaxExp)
    static constexpr int kCellBits = 3, kCells = 1 << kCellBits, kDegree = 11;
    static constexpr double kTolerance = 2e-14;

  private:
    static constexpr double kMinY = 0x1.0p-40, kMaxY = 0x1.0p6;
    static_assert(kMinExp == -40 && kMaxExp == 6);
    const Distribution spatial_;
    int n_ = 1;
    std::vector<double> coef_;
    std::vector<std::uint8_t> ok_;
    std::array<double, kCells> centre_{};
    double max_err_ = 0;
};

/// The group factors of one cluster realization, revealed lazily (the same law as
/// draw_group_factors). On reset the slow units are drawn, and the groups holding slow GPUs get
/// their factor at once; every other ("healthy") group has g = phi_0(max G) iid, max G with CDF
/// H = F_S^n (n = group_gpus, F_S the spatial law, phi_0 the effective factor of a group with
/// no slow member, increasing), drawn by inversion g = phi_0(H^-1(P)), P uniform. The healthy
/// groups' P are revealed top-down: given what was revealed, the unrevealed P of the "pool" are
/// iid uniform on (0, p_tau), and
///  * extend: the largest of the c pool P is p_tau U^(1/c), put on a uniformly random pool
///    group (the new p_tau);
///  * cap_top: the same within a given subset S of the pool (its k largest, each at a uniformly
///    random remaining member of S); the rest of S leaves the pool, iid uniform below the k-th
///    ("capped" at it); the pool outside S is unchanged;
///  * reveal: one group's P uniform below its cap (p_tau for a pool group).
/// Each draw has the exact conditional law, so the joint law of all g is the model's whatever
/// the order of the calls, for any spatial law (inversion is monotone: an unrevealed group's g
/// is at most upper(gi) = phi_0(H^-1) of its cap).
///
/// Supported placements (supports()): ordered, random (the ordered law: persistent.hpp's
/// placement semantics) and variability_aware, where which groups hold slow GPUs follows from
/// the slow units alone.
class LazyGroupFactors {
  public:
    LazyGroupFactors(const StepModel& model, const PersistentLayout& layout);
    static bool supports(const StepModel& model, const PersistentLayout& layout);

    /// A new realization drawn from `stream`: slow groups revealed, healthy ones not.
    void reset(const Stream& stream);
    /// Every pool group has g <= tau() (+infinity before the first extend).
    double tau() const { return tau_; }
    /// Groups not revealed (pool and capped).
    std::int64_t unrevealed() const { return unrevealed_; }
    bool known(int gi) const { return state_[gi] == kKnown; }
    bool in_pool(int gi) const { return state_[gi] == kPool; }
    /// An upper bound of g[gi]: g itself if revealed, else phi_0(H^-1) of its cap.
    double upper(int gi) const {
        return state_[gi] == kKnown ? g_[gi] : state_[gi] == kCapped ? cap_[gi] : tau_;
    }
    /// g of every group; valid for the revealed ones.
    const std::vector<double>& g() const { return g_; }
    /// Groups in the order they were revealed.
    const std::vector<std::int32_t>& revealed() const { return revealed_; }
    /// Reveals the k largest pool factors (fewer if fewer are left).
    void extend(int k);
    /// Reveals the k largest factors of the pool groups among gis[0 .. count) and caps the
    /// others of them at the k-th.
    void cap_top(const std::int32_t* gis, int count, int k);
    /// Reveals group gi (no-op if revealed).
    void reveal(int gi);
    /// reveal() of gis[0 .. count) (distinct groups) in that order: the same draws and values,
    /// in three passes (the uniforms and logs, the quantiles, the bookkeeping) so that the
    /// quantiles of different groups overlap instead of each waiting on its log.
    void reveal_groups(const std::int32_t* gis, int count);
    void reveal_all();

  private:
    static constexpr std::uint8_t kPool = 0, kKnown = 1, kCapped = 2;
    double healthy(double log_p) const;
    void set_known(int gi, double g);
    void leave_pool(int gi);

    const StepModel& m_;
    const PersistentLayout& l_;
    std::shared_ptr<const HealthyQuantile> healthy_;  ///< H^-1 of ln p
    Stream stream_;
    int groups_ = 0;
    std::vector<double> g_, log_cap_, cap_;
    std::vector<std::uint8_t> state_;
    std::vector<std::int32_t> revealed_, slow_members_, subset_;
    std::vector<std::int64_t> slow_units_;
    /// ordered placement: the groups holding GPUs of unit u (u < job_units) are
    /// unit_group_[unit_group_begin_[u] .. unit_group_begin_[u + 1]), unit_group_gpus_ of them
    std::vector<std::int32_t> unit_group_begin_, unit_group_, unit_group_gpus_;
    /// the pool groups are pool_list_[0 .. pool_) (O(1) uniform pick and removal);
    /// pool_pos_[gi] is gi's index in pool_list_
    std::vector<std::int32_t> pool_list_, pool_pos_;
    /// entries of both moved from the identity: touched_[0 .. n_touched_) (at most
    /// groups_ + 4; past that, scrambled_)
    std::vector<std::int32_t> touched_;
    size_t n_touched_ = 0;
    std::vector<std::int32_t> batch_gi_;  ///< reveal_groups / reveal_all scratch
    std::vector<double> batch_v_;
    bool scrambled_ = false;  ///< the lists are to be rebuilt (touched_ incomplete)
    std::int64_t unrevealed_ = 0, pool_ = 0;
    double log_p_tau_ = 0;  ///< ln p_tau
    double tau_ = 0;
};

}  // namespace prism::stochastic::detail
