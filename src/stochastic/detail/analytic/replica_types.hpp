#pragma once

// Replica types and scenarios: where the slow units land (DESIGN.md section 2, persistent
// factors, and section 3, "DP replicas are independent until they synchronize").
//
// A replica type gives each stage a group law (healthy, or with some slow members) and carries
// the mean shift its slow stages other than smax add to the linear part (stage_curves.hpp). A
// scenario is a weighted assignment of the d replicas to types: the step's max over replicas
// is then the scenarios' mixture of products of the types' CDFs. By placement:
//  * ordered and random placement: each of the job's units is slow independently with
//    probability q (random placement draws the job's nodes at random from the machine, ranks in
//    order inside them: the same law, persistent.hpp), and a slow unit touches the replicas its
//    unit pattern says (unit_patterns.hpp); the slow units enter
//    through their probability generating function (PGF) over the replica types one unit makes
//    (rep_patterns). Lockstep (FSDP/ZeRO-3) pipelines whose patterns touch disjoint stages
//    enumerate the number of slow units of smax's pattern instead (binomial scenarios, counts
//    of 8 and more binned ~20% wide), the other patterns entering W through their joint PGF
//    (other_patterns);
//  * variability-aware placement: the slow units that must be used (their number less the
//    spare units, binomial) are packed into groups in preference order: one scenario per count,
//    a lockstep stage approximated by its most-slow group.

#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "src/stochastic/detail/analytic/group_law.hpp"
#include "src/stochastic/detail/analytic/stage_curves.hpp"
#include "src/stochastic/detail/persistent.hpp"

namespace prism::stochastic::detail::ssta {

/// Slow units as a probability generating function: each of `units` units is slow with
/// probability q, independently; a slow unit turns one of `patterns` (frequency, list of
/// (stage, slow members)) slow.
struct UnitPgf {
    double q = 0;
    double units = 0;
    std::vector<std::pair<double, std::vector<std::pair<int, int>>>> patterns;
};

/// The distribution of one replica type's Delta on the common x grid.
struct ReplicaType {
    std::vector<const GroupLaw*> stage_law;  ///< per stage
    const UnitPgf* pgf = nullptr;            ///< lockstep: slow units act on W directly
    double extra_mean = 0;  ///< slow stages other than smax: their mean shift of the others' sum
};

/// A weighted assignment of the replicas to types: (type, replicas) pairs.
struct Scenario {
    double weight;
    std::vector<std::pair<int, int>> counts;
};

/// The replica types and scenarios of a point. Its members point into each other and into the
/// GroupLaws it was built from: it does not move.
class ReplicaSet {
  public:
    ReplicaSet(const StepModel& m, const PersistentLayout& l, const StageCurves& c,
               const GroupLaws& group);
    ReplicaSet(const ReplicaSet&) = delete;
    ReplicaSet& operator=(const ReplicaSet&) = delete;

    std::deque<GroupLaw> laws;       ///< the types' laws other than the base law (stable addresses)
    std::vector<ReplicaType> types;  ///< types[0]: the base type (no slow member)
    std::vector<Scenario> scenarios;
    bool pgf_mode = false;  ///< the slow units enter through unit_pgf
    UnitPgf unit_pgf;
    /// PGF mode without lockstep: the replica types one slow unit makes, with its frequency
    std::vector<std::pair<double, std::vector<int>>> rep_patterns;
    /// (units, pattern) of the lockstep slow-unit patterns other than smax's (disjoint form)
    std::vector<std::pair<double, std::vector<std::pair<int, int>>>> other_patterns;

  private:
    /// E[g] of a clean group with `slow_members` slow members (memoized)
    double mean_g(int slow_members);
    /// the others' sum moves by a_s c_s (E[g_s] - E_healthy[g]) when stage s has another law
    double law_shift(int st, const GroupLaw& law) const;
    /// the type with slow members sig[s] per stage (created on first use)
    int type_for_sig(const std::vector<int>& sig);
    /// PGF mode without lockstep: the types one slow unit makes
    void unit_types();
    /// lockstep with slow-unit patterns on disjoint stages: scenarios of smax's pattern's count
    void disjoint_lockstep_scenarios(
        const std::vector<std::pair<double, std::vector<std::pair<int, int>>>>& patterns,
        const std::vector<int>& stage_pattern);
    /// variability-aware placement: scenarios of the slow units that must be used
    void aware_scenarios();
    /// the per-replica, per-stage slow members of e slow units packed in preference order, and
    /// the replicas they touch
    void pack_slow_units(std::int64_t e, std::vector<std::vector<int>>& per_rep,
                         std::vector<int>& touched) const;

    const StepModel& m_;
    const PersistentLayout& l_;
    const StageCurves& c_;
    const GroupLaws& g_;
    std::map<int, double> mean_g_cache_;
    std::map<std::vector<int>, int> sig_type_;
};

}  // namespace prism::stochastic::detail::ssta
