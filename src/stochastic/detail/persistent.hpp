#pragma once

// Persistent factors of one cluster realization: which GPUs (and slow units: nodes or GPUs) each
// TP x CP group lands on under a placement, and the resulting group factors g.
//
// Placement semantics (DesignPoint::placement):
//  * ordered: rank coordinates (tp, cp, pp, dp) are laid onto consecutive GPUs of the machine,
//    innermost dimension first, using the first N GPUs;
//  * random: the N ranks land on a uniformly random set of N of the machine's GPUs, in random
//    order;
//  * variability_aware: knowing which units are slow, healthy units are used first (a machine
//    larger than the job, ClusterSpec::total_gpus > N, leaves slow units out); slow GPUs that
//    must be used are packed into as few TP x CP groups as possible, placed on the stage with
//    the least work, one group per replica before a second stage is used.

#include <cstdint>
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
                        std::vector<double>& g);

/// Indices (ascending) of the slow units among [0, units), each slow independently with
/// probability q: geometric skipping, the number of healthy units before the next slow one is
/// floor(ln U / ln(1 - q)), exactly Geometric(q), so about q * units + 1 draws instead of units.
/// Returns the count; `out` (if not null) receives the indices.
std::int64_t draw_slow_units(double q, std::int64_t units, Stream& stream,
                             std::vector<std::int64_t>* out);

/// The group factors of one cluster realization, revealed lazily (the same law as
/// draw_group_factors). On reset the slow units are drawn, and the groups holding slow GPUs get
/// their factor at once; every other ("healthy") group has g iid with CDF H = F_S^n (n =
/// group_gpus, F_S the spatial law), drawn by inversion g = H^-1(P), P uniform. The healthy
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
/// is at most upper(gi) = H^-1 of its cap).
///
/// Supported placements (supports()): ordered and variability_aware, where which groups hold
/// slow GPUs follows from the slow units alone; random placement uses draw_group_factors.
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
    /// An upper bound of g[gi]: g itself if revealed, else H^-1 of its cap.
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
    void reveal_all();

  private:
    static constexpr std::uint8_t kPool = 0, kKnown = 1, kCapped = 2;
    double healthy(double log_p) const;
    void set_known(int gi, double g);
    void leave_pool(int gi);

    const StepModel& m_;
    const PersistentLayout& l_;
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
    std::vector<std::int32_t> touched_;  ///< entries of both moved from the identity
    std::int64_t unrevealed_ = 0, pool_ = 0;
    double log_p_tau_ = 0;  ///< ln p_tau
    double tau_ = 0;
};

}  // namespace prism::stochastic::detail
