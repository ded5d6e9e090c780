#pragma once

// The reduced step model both evaluators share (DESIGN.md sections 2-3), built once per point:
//
//  * A TP x CP group (sync_size n GPUs) acts as one rank. A compute op of class c with base b
//    takes b * g * Y, with Y the max of n iid transient factors X_c (F^n exactly) and g the
//    group's persistent factor: phi_k(max over its members' G), k its slow members, phi the
//    effective factor (effective_factor.hpp) that makes b g E[Y] the op's mean given the
//    largest member factor (max G alone would overstate it: the slowest member rarely has the
//    largest transient draw too). Under FSDP/ZeRO-3 (dp_lockstep) the group is the whole
//    TP x CP x DP set of a stage, so n = tp * cp * dp and g = phi_0(max over all of its GPUs)
//    (slow members are not told apart there: phi_0 overstates a stage that holds one).
//  * A collective op of class c takes b * R * X_c: one draw shared by all participants, R the
//    per-step communication regime.
//  * Ops of one segment run concurrently (Clark's max of the ops' mean and variance at g = R =
//    1, scaled by g or R according to the op with the largest mean).
//  * A chunk's forward (backward) for one microbatch sums many such independent terms; given
//    (g, R) it is taken as normal with the exact conditional mean and variance (central limit
//    theorem), unless the whole replica has a single random term, which keeps its exact law.
//  * Dataloader and optimizer carry transient variability only (no persistent factor); the DP
//    gradient sync is one collective per step, starting when the last replica finishes.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/model/step_profile.hpp"
#include "src/stochastic/detail/effective_factor.hpp"
#include "src/stochastic/distribution.hpp"
#include "src/timing/flat_pipeline.hpp"
#include "src/timing/periodic_pipeline.hpp"

namespace prism::stochastic::detail {

/// A segment whose concurrent ops mix compute and communication (an FSDP gather under the
/// previous layer's compute, an overlapped TP or CP exchange): given (g, R) it takes
/// max(g A, R B), A the max of its compute ops (the group's transient maxima) and B of its
/// communication ops, both taken as normal (Clark's moments of each side at g = R = 1).
struct MixedSegment {
    double comp_mean = 0, comp_var = 0;  ///< A at g = 1
    double comm_mean = 0, comm_var = 0;  ///< B at R = 1
    int repeat = 1;                      ///< identical segments in the chunk (layers)
};

/// Duration of one chunk op for one microbatch given (g, R): the segments of one kind add
/// g * comp + R * comm (mean) and g^2 comp_var + R^2 comm_var (variance); each mixed segment
/// adds Clark's moments of max(g A, R B), so that slowing either side never speeds the op
/// (the max is nondecreasing in both) and a slow group slows a segment that its communication
/// won at nominal speed.
struct ChunkCost {
    double comp_mean = 0, comp_var = 0;
    double comm_mean = 0, comm_var = 0;
    std::vector<MixedSegment> mixed;
    int random_terms = 0;    ///< op instances with a non-degenerate factor
    double routed_mean = 0;  ///< the routed MoE ops' share of the mean at g = R = 1
    /// Mean seconds of its document-masked attention (Op::documents) at g = R = 1: a
    /// microbatch whose sequences' S is W E[S] takes (W - 1) documents_s longer
    /// (docs/document_lengths.md)
    double documents_s = 0;
    /// The linearization g * lin_comp + R * lin_comm of mean(g, R) that the analytic
    /// evaluator's passes use: the chord over the job's range of g at the regime's mean
    /// (exact at both ends; equal to comp_mean and comm_mean when nothing is mixed), and its
    /// variance split between the two sides by the probability each wins.
    double lin_comp = 0, lin_comm = 0, lin_comp_var = 0, lin_comm_var = 0;

    /// mean(g, r) and var(g, r) together (one Clark's max per mixed segment)
    Moments moments(double g, double r) const;
    double mean(double g, double r) const { return moments(g, r).mean; }
    double var(double g, double r) const { return moments(g, r).var; }
    /// Majorants for every g, R >= 0: mean(g, R) <= g comp_bound_mean() + R comm_bound_mean(),
    /// var(g, R) <= g^2 comp_bound_var() + R^2 comm_bound_var(), and mean(g', R) - mean(g, R)
    /// <= (g' - g) comp_bound_mean() for g' >= g (the max is 1-Lipschitz in each side; the
    /// variance of a max of independent terms is at most the sum of theirs, Efron-Stein).
    double comp_bound_mean() const { return with_mixed(comp_mean, &MixedSegment::comp_mean); }
    double comm_bound_mean() const { return with_mixed(comm_mean, &MixedSegment::comm_mean); }
    double comp_bound_var() const { return with_mixed(comp_var, &MixedSegment::comp_var); }
    double comm_bound_var() const { return with_mixed(comm_var, &MixedSegment::comm_var); }

    /// Clark's moments of max(g A, R B) for one mixed segment.
    static Moments mixed_moments(const MixedSegment& s, double g, double r);

  private:
    /// `base` plus every mixed segment's `side` (times its repeat)
    double with_mixed(double base, double MixedSegment::*side) const {
        for (const auto& s : mixed) base += s.repeat * (s.*side);
        return base;
    }
};

/// The single random term of a replica (exact law kept when it is the only one).
struct SingleTerm {
    bool present = false;
    bool comm = false;
    double base_s = 0;
    double n = 1;  ///< max of n iid
    int cls = 0;
};

struct StepModel {
    int stages = 1, chunks = 1, microbatches = 1;
    int replicas = 1;  ///< replicas the step is the max over (1 when lockstep)
    int dp = 1;
    bool lockstep = false;
    int group_gpus = 1;  ///< GPUs of one TP x CP group
    double deterministic_s = 0;

    /// fwd[s * chunks + c], bwd[...]: cost of chunk c on stage s for one microbatch
    std::vector<ChunkCost> fwd, bwd;
    ChunkCost p2p, dataloader, sync, optimizer;  ///< p2p and sync are comm, the others fixed
    double sync_overlap_s = 0;
    SingleTerm single;
    int replica_random_terms = 0;

    std::array<Distribution, kKernelClassCount> transient;
    Distribution regime;
    Distribution spatial;
    std::uint64_t spatial_id = 0;  ///< of the spatial spec (spec_id), to key cached tables
    std::uint64_t regime_id = 0;   ///< of the communication regime's spec, likewise
    /// (tp, cp, placement kind, order...): with the sizes above it fixes the layout's GPU
    /// numbering, to key cached slow-unit patterns (exactly)
    std::vector<std::int64_t> placement_key;
    double slow_probability = 0, slow_factor = 1;
    int slow_unit_gpus = 1;  ///< GPUs per slow unit (node or 1)
    /// MoE routing (docs/moe.md): a routed op of base b (at the profile's load factor
    /// routing_base) takes b / routing_base * Z for its own draw Z of the busiest rank's load
    /// factor, iid per op instance (microbatch, layer, pass) given the step's drift, with these
    /// moments (the law's, in both evaluators); {1, 1} when inactive.
    stochastic::LoadMoments routing;
    double routing_base = 1;
    /// One layer's routed ops of one microbatch (dispatch, expert GEMMs, combine; forward and
    /// backward) wait for the same busiest rank: one Z for their sum T = routing_layer_s. Each
    /// op of base b keeps its own transient noise but carries b T Var(Z) of the routing's
    /// (not b^2 Var(Z)), so that the ops' variances, summed as independent, give T^2 Var(Z).
    double routing_layer_s = 0;
    bool routing_active = false;
    /// The drift shared by the step (routing.hpp SharedDrift): every routed op's mean times the
    /// step's S (mean 1), its independent part keeping E[Var(Z | w)] (in `routing`). Both
    /// evaluators add (S - 1) x routing_shared_s to the step, routing_shared_s the routed ops'
    /// mean seconds on the critical path of the mean durations (at g = 1, R = its mean): the
    /// analytic one from the law of S (a shifted gamma of its sd and skewness), Monte Carlo
    /// from S = E[Z | w] / E[Z] at a drift vector w drawn per sampled step.
    stochastic::RoutingLoad routing_law;
    stochastic::SharedDrift routing_shared;
    double routing_shared_s = 0;
    /// Variable-length packing (docs/document_lengths.md): a microbatch's chunk ops on every
    /// stage take (W - 1) documents_s longer, W = S / (b E[S]) of its b sequences (one draw per
    /// replica and microbatch, shared by its forward and backward on every stage). Monte Carlo
    /// resamples each sequence's S from exact packings (documents_table); the analytic
    /// evaluator adds the replica's variance of it along the critical path to its normal part
    /// (stage_curves.cpp). Inactive: no attention op is masked per document.
    bool documents_active = false;
    int documents_sequences = 1;            ///< b
    double documents_mean_s2 = 0;           ///< E[S] (tokens^2), the profile's attention's
    double documents_w_var = 0;             ///< Var(W) of one microbatch: Var(S) / (b E[S]^2)
    std::vector<double> documents_stage_s;  ///< per stage: sum over chunks of fwd + bwd
    std::shared_ptr<const std::vector<double>> documents_table;  ///< exact draws of S
    double documents_table_mean_s2 = 0;  ///< their mean (Monte Carlo's W: S / (b this))
    bool persistent_deterministic = true;
    /// phi of the groups (null: g = max G, nothing random to correct)
    std::shared_ptr<const EffectiveFactor> effective;
    /// The group factor of a group with k slow members whose largest member factor is g
    /// (lockstep: of a stage, k not told apart).
    double group_factor(int k, double g) const {
        return effective ? (*effective)(lockstep ? 0 : k, g) : g;
    }

    /// The schedule evaluated with per-class durations (the analytic's passes, Monte Carlo's
    /// mean-duration runs): cost independent of the microbatches.
    std::shared_ptr<const timing::PeriodicPipeline> periodic;
    /// The schedule op by op (Monte Carlo's draws, whose every op has its own duration),
    /// fetched from the per-thread cache on first use.
    const timing::FlatPipeline& flat() const {
        if (!flat_) flat_ = timing::cached_flat_pipeline({stages, chunks, microbatches});
        return *flat_;
    }

    /// Per-microbatch stage work at g = R = 1 (sum of fwd + bwd over chunks), to rank stages.
    std::vector<double> stage_work_s;
    std::vector<double> stage_comp_s, stage_comm_s, stage_var_comp, stage_var_comm;

  private:
    mutable std::shared_ptr<const timing::FlatPipeline> flat_;
};

/// The bit of `deterministic_classes` that makes the routing deterministic (Z at its mean: the
/// `routing` sensitivity class); the bits below it are the kernel classes.
inline constexpr std::uint32_t kRoutingClassBit = 1u << kKernelClassCount;

/// The bit of `deterministic_classes` that makes the documents' term deterministic (W = 1: the
/// `documents` sensitivity class).
inline constexpr std::uint32_t kDocumentsClassBit = 1u << (kKernelClassCount + 1);

/// Builds the model; `deterministic_classes` are made deterministic (X = 1) for sensitivity.
StepModel build_step_model(const StepProfile& profile, const DesignPoint& point,
                           const HardwareSpec& hw, const ClusterSpec& cluster,
                           const VariabilitySpec& variability,
                           std::uint32_t deterministic_classes = 0);

/// The amplitude of the job's regime relative to comm_regime (RegimeLevels in spec.hpp): the
/// levels' multipliers weighted by the collective seconds per level (collective_seconds_by_level;
/// local counts as nvlink); 1 without collectives.
double level_amplitude(const RegimeLevels& levels, const std::array<double, 5>& seconds);

/// The job's regime: `regime` with its cv times level_amplitude (a constant when that is 0).
/// Throws ConfigError for an empirical or mixture regime with levels set.
DistributionSpec job_regime(const DistributionSpec& regime, const RegimeLevels& levels,
                            const std::array<double, 5>& seconds);

/// |alpha| beyond which clark_max returns the winner's moments unchanged (step_model.cpp)
inline constexpr double kClarkCertain = 9.0;
/// nodes per unit of the normal pair's table on [-kClarkCertain, kClarkCertain]
inline constexpr double kNormalTableDensity = 128.0;

/// The standard normal's cdf Phi(x) and density phi(x) together: on [-9, 9] cubic Hermite
/// interpolation of a table with the exact derivatives (phi and -x phi) at its nodes, each
/// within h^4 / 384 max|f''''| of the truth at h = 1 / 128 (Phi'''' = phi''', at most 0.55;
/// phi'''' at most 1.2: 1.2e-11); outside, libm. A mixed segment's moments take one pair per
/// lane and sample in the Monte Carlo evaluator, where libm's erfc and exp were half the time.
struct NormalPair {
    double cdf = 0, pdf = 0;
};
NormalPair normal_pair(double x);

/// Clark (1961): mean and variance of max(A, B) for independent normals A, B.
Moments clark_max(Moments a, Moments b);

}  // namespace prism::stochastic::detail
