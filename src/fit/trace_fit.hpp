#pragma once

// The variability of DESIGN.md section 2 fitted from profiler traces: per kernel class the
// transient factor X (family_fit.hpp), across ranks of one job the persistent spatial spread
// G, and per step the communication regime R. Pure: the traces are read by io/trace_reader.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/fit/family_fit.hpp"
#include "src/model/spec.hpp"

namespace prism::fit {

/// One kernel invocation of a traced job. `site` names the kernel (name, launch shape and its
/// order among equal kernels in the step): the same site on every step and rank of the job.
struct KernelInvocation {
    KernelClass cls = KernelClass::gemm;
    std::uint32_t site = 0;
    std::uint32_t rank = 0;  ///< index of the rank's trace within the job
    std::uint32_t step = 0;  ///< index of the profiler step (16 bits wrapped past 65,535)
    double duration_s = 0;
};

/// The kernels of one job (one or several ranks' traces of the same run).
struct TracedJob {
    std::string name;  ///< for provenance: the trace files
    int ranks = 1;
    int steps = 0;
    double resolution_s = 0;  ///< the timer's resolution (1 us when durations are integers)
    std::vector<KernelInvocation> kernels;
    std::vector<double> step_time_s;  ///< the first rank's profiler steps
};

struct TraceFitOptions {
    /// Kernels whose median duration is below this are left out: their relative spread is
    /// launch jitter and timer rounding, not the spread of the work the model times.
    double min_kernel_s = 20e-6;
    int qq_points = 99;
};

/// One kernel class's fit, with where its numbers come from.
struct ClassFit {
    KernelClass cls = KernelClass::gemm;
    TransientFit fit;
    double time_s = 0;       ///< total duration of the class's invocations in the traces
    double used_time_s = 0;  ///< of which in the fitted groups
    std::size_t invocations = 0;
    std::vector<int> jobs;  ///< indices of the jobs that contributed kernels
};

/// A variance-components estimate: a factor's cv with the number of levels it rests on.
struct ComponentFit {
    double cv = 0;
    int levels = 0;  ///< ranks (spatial) or steps (regime) summed over jobs
    int jobs = 0;
    /// the between-level variance before subtracting the within-level noise (log scale)
    double raw_var = 0;
    double noise_var = 0;
};

struct TraceFit {
    std::vector<ClassFit> classes;        ///< classes with at least one fitted group, in enum order
    std::optional<ComponentFit> spatial;  ///< only with 2 or more ranks of one job
    std::optional<ComponentFit> regime;   ///< only with communication kernels in 2+ steps
};

/// How much of a job's step-to-step variation the fitted variability explains: the fitted X
/// per class applied to every kernel of the first rank at its site's median (independent draws)
/// and the fitted R to its collectives, against the measured steps. Kernels on concurrent
/// streams are summed as if in series, so this is the variation of the GPU's work, not a
/// schedule.
struct StepVariation {
    int steps = 0;
    double step_mean_s = 0, step_sd_s = 0;      ///< the profiler steps
    double kernel_mean_s = 0, kernel_sd_s = 0;  ///< the summed kernel time per step, measured
    double compute_sd_s = 0;    ///< predicted: the compute classes' fitted transient factors
    double comm_sd_s = 0;       ///< predicted: the collectives' transient factors and regime
    double predicted_sd_s = 0;  ///< both
};

StepVariation explain_steps(const TracedJob& job, const TraceFit& fit);

/// Fits every class present in `jobs`. Communication kernels are divided by the fitted
/// per-step regime before their transient fit (R and X are separate factors). Throws
/// ModelError when no class has two invocations of one kernel above min_kernel_s.
TraceFit fit_traces(const std::vector<TracedJob>& jobs, const TraceFitOptions& options = {});

}  // namespace prism::fit
