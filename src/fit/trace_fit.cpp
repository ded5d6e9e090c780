#include "src/fit/trace_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/fit/detail/median.hpp"

namespace prism::fit {

namespace {

using detail::median_of;

// The invocations of one site on one rank.
struct SiteRank {
    KernelClass cls = KernelClass::gemm;
    std::uint32_t site = 0;
    std::uint32_t rank = 0;
    std::vector<std::uint32_t> step;
    std::vector<double> duration_s;
    double median_s = 0;
    double log_mean = 0;
};

bool is_compute(KernelClass c) {
    return c == KernelClass::gemm || c == KernelClass::attention || c == KernelClass::elementwise;
}

// Groups a job's invocations by (site, rank); keeps those with 2+ positive durations and a
// median of at least min_kernel_s.
std::vector<SiteRank> site_ranks(const TracedJob& job, double min_kernel_s) {
    std::map<std::uint64_t, SiteRank> by_key;
    for (const KernelInvocation& k : job.kernels) {
        if (!(k.duration_s > 0)) continue;
        SiteRank& s = by_key[(std::uint64_t{k.site} << 32) | k.rank];
        s.cls = k.cls;
        s.site = k.site;
        s.rank = k.rank;
        s.step.push_back(k.step);
        s.duration_s.push_back(k.duration_s);
    }
    std::vector<SiteRank> out;
    for (auto& [key, s] : by_key) {
        if (s.duration_s.size() < 2) continue;
        s.median_s = median_of(s.duration_s);
        if (s.median_s < min_kernel_s) continue;
        for (double d : s.duration_s) s.log_mean += std::log(d);
        s.log_mean /= static_cast<double>(s.duration_s.size());
        out.push_back(std::move(s));
    }
    return out;
}

// Accumulates a between-level variance over jobs, weighted by their degrees of freedom.
struct Pooled {
    double raw = 0, noise = 0, dof = 0;
    int levels = 0, jobs = 0;

    void add(double raw_var, double noise_var, int n_levels) {
        raw += (n_levels - 1) * raw_var;
        noise += (n_levels - 1) * noise_var;
        dof += n_levels - 1;
        levels += n_levels;
        ++jobs;
    }
    std::optional<ComponentFit> result() const {
        if (dof <= 0) return std::nullopt;
        ComponentFit c;
        c.raw_var = raw / dof;
        c.noise_var = noise / dof;
        c.cv = std::sqrt(std::expm1(std::max(0.0, c.raw_var - c.noise_var)));
        c.levels = levels;
        c.jobs = jobs;
        return c;
    }
};

// Per-step communication regime of one job: the weighted mean log residual of its collectives
// in each step (log x = mu_site + rho_step + eps). Returns the steps' effects, shrunk toward 0
// by sigma_rho^2 / (sigma_rho^2 + noise) once the pooled estimate is known (see fit_traces).
struct StepEffects {
    std::vector<double> effect;  // per step index; 0 where no collective ran
    double raw_var = 0, noise_var = 0;
    int steps = 0;
};

StepEffects step_effects(const std::vector<SiteRank>& groups, int n_steps) {
    StepEffects out;
    out.effect.assign(static_cast<std::size_t>(std::max(n_steps, 1)), 0.0);
    std::vector<double> w_sum(out.effect.size(), 0.0), w_sq(out.effect.size(), 0.0);
    for (const SiteRank& g : groups) {
        if (!is_communication(g.cls)) continue;
        for (std::size_t i = 0; i < g.duration_s.size(); ++i) {
            const std::size_t s = std::min<std::size_t>(g.step[i], out.effect.size() - 1);
            out.effect[s] += g.median_s * (std::log(g.duration_s[i]) - g.log_mean);
            w_sum[s] += g.median_s;
            w_sq[s] += g.median_s * g.median_s;
        }
    }
    double mean = 0;
    for (std::size_t s = 0; s < out.effect.size(); ++s) {
        if (w_sum[s] <= 0) continue;
        out.effect[s] /= w_sum[s];
        mean += out.effect[s];
        ++out.steps;
    }
    if (out.steps < 2) return out;
    mean /= out.steps;
    // The residual noise after removing the step effects sets each effect's sampling variance.
    double ss = 0, dof = 0;
    for (const SiteRank& g : groups) {
        if (!is_communication(g.cls)) continue;
        for (std::size_t i = 0; i < g.duration_s.size(); ++i) {
            const std::size_t s = std::min<std::size_t>(g.step[i], out.effect.size() - 1);
            const double e = std::log(g.duration_s[i]) - g.log_mean - (out.effect[s] - mean);
            ss += g.median_s * e * e;
        }
        dof += g.median_s * (static_cast<double>(g.duration_s.size()) - 1);
    }
    const double eps_var = dof > 0 ? ss / dof : 0;
    for (std::size_t s = 0; s < out.effect.size(); ++s) {
        if (w_sum[s] <= 0) continue;
        out.effect[s] -= mean;
        out.raw_var += out.effect[s] * out.effect[s] / (out.steps - 1);
        out.noise_var += eps_var * w_sq[s] / (w_sum[s] * w_sum[s]) / out.steps;
    }
    return out;
}

// Per-rank persistent effect of one job's compute kernels: log m_{site,rank} = a_site + b_rank.
struct RankEffects {
    double raw_var = 0, noise_var = 0;
    int ranks = 0;
};

RankEffects rank_effects(const std::vector<SiteRank>& groups, int n_ranks, double transient_var) {
    RankEffects out;
    if (n_ranks < 2) return out;
    std::map<std::uint32_t, std::vector<const SiteRank*>> by_site;
    for (const SiteRank& g : groups) {
        if (is_compute(g.cls)) by_site[g.site].push_back(&g);
    }
    std::vector<double> b(static_cast<std::size_t>(n_ranks), 0.0), w(b.size(), 0.0),
        w2(b.size(), 0.0), inv_n(b.size(), 0.0);
    for (const auto& [site, members] : by_site) {
        if (members.size() < 2) continue;
        double centre = 0;
        for (const SiteRank* m : members) centre += m->log_mean;
        centre /= static_cast<double>(members.size());
        for (const SiteRank* m : members) {
            const std::size_t r = m->rank;
            b[r] += m->median_s * (m->log_mean - centre);
            w[r] += m->median_s;
            w2[r] += m->median_s * m->median_s / static_cast<double>(m->duration_s.size());
        }
    }
    double mean = 0;
    for (std::size_t r = 0; r < b.size(); ++r) {
        if (w[r] <= 0) continue;
        b[r] /= w[r];
        mean += b[r];
        ++out.ranks;
    }
    if (out.ranks < 2) return out;
    mean /= out.ranks;
    for (std::size_t r = 0; r < b.size(); ++r) {
        if (w[r] <= 0) continue;
        out.raw_var += (b[r] - mean) * (b[r] - mean) / (out.ranks - 1);
        // Each site-rank log mean carries transient_var / n of noise.
        out.noise_var += transient_var * w2[r] / (w[r] * w[r]) / out.ranks;
    }
    return out;
}

}  // namespace

TraceFit fit_traces(const std::vector<TracedJob>& jobs, const TraceFitOptions& options) {
    std::vector<std::vector<SiteRank>> groups;
    for (const TracedJob& job : jobs) groups.push_back(site_ranks(job, options.min_kernel_s));

    // The regime first: collectives are divided by it before their transient fit.
    Pooled regime;
    std::vector<StepEffects> effects;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        effects.push_back(step_effects(groups[j], jobs[j].steps));
        if (effects.back().steps >= 2) {
            regime.add(effects.back().raw_var, effects.back().noise_var, effects.back().steps);
        }
    }
    TraceFit out;
    out.regime = regime.result();
    const double rho_var =
        out.regime ? std::max(0.0, out.regime->raw_var - out.regime->noise_var) : 0.0;

    std::array<std::vector<KernelGroup>, kKernelClassCount> by_class;
    std::array<ClassFit, kKernelClassCount> info;
    std::array<std::vector<bool>, kKernelClassCount> job_seen;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        for (const KernelInvocation& k : jobs[j].kernels) {
            ClassFit& c = info[static_cast<std::size_t>(k.cls)];
            c.time_s += k.duration_s;
            ++c.invocations;
        }
        for (const SiteRank& g : groups[j]) {
            const auto c = static_cast<std::size_t>(g.cls);
            KernelGroup kg;
            const StepEffects& e = effects[j];
            const double shrink =
                rho_var > 0 && e.steps >= 2 ? rho_var / (rho_var + e.noise_var) : 0.0;
            for (std::size_t i = 0; i < g.duration_s.size(); ++i) {
                const double rho =
                    is_communication(g.cls)
                        ? shrink * e.effect[std::min<std::size_t>(g.step[i], e.effect.size() - 1)]
                        : 0.0;
                kg.durations_s.push_back(g.duration_s[i] * std::exp(-rho));
                info[c].used_time_s += g.duration_s[i];
            }
            by_class[c].push_back(std::move(kg));
            job_seen[c].resize(jobs.size(), false);
            job_seen[c][j] = true;
        }
    }
    TransientFitOptions fit_options;
    fit_options.qq_points = options.qq_points;
    for (const TracedJob& job : jobs)
        fit_options.resolution_s = std::max(fit_options.resolution_s, job.resolution_s);
    double compute_var = 0, compute_time = 0;
    for (int k = 0; k < kKernelClassCount; ++k) {
        const auto c = static_cast<std::size_t>(k);
        std::size_t samples = 0;
        for (const KernelGroup& g : by_class[c]) samples += g.durations_s.size();
        if (by_class[c].empty() || samples < 2) continue;
        ClassFit fit = info[c];
        fit.cls = static_cast<KernelClass>(k);
        fit.fit = fit_transient(by_class[c], fit_options);
        for (std::size_t j = 0; j < job_seen[c].size(); ++j) {
            if (job_seen[c][j]) fit.jobs.push_back(static_cast<int>(j));
        }
        if (is_compute(fit.cls)) {
            compute_var += fit.used_time_s * std::log1p(fit.fit.best.cv * fit.fit.best.cv);
            compute_time += fit.used_time_s;
        }
        out.classes.push_back(std::move(fit));
    }
    if (out.classes.empty()) {
        throw ModelError(
            fmt::format("trace fit: no kernel ran at least twice with a median of {:g} us or more",
                        options.min_kernel_s * 1e6));
    }

    Pooled spatial;
    const double transient_var = compute_time > 0 ? compute_var / compute_time : 0;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        const RankEffects r = rank_effects(groups[j], jobs[j].ranks, transient_var);
        if (r.ranks >= 2) spatial.add(r.raw_var, r.noise_var, r.ranks);
    }
    out.spatial = spatial.result();
    return out;
}

StepVariation explain_steps(const TracedJob& job, const TraceFit& fit) {
    StepVariation v;
    v.steps = static_cast<int>(job.step_time_s.size());
    if (v.steps < 2) return v;
    const auto mean_sd = [](const std::vector<double>& x, double* mean, double* sd) {
        const double n = static_cast<double>(x.size());
        *mean = std::accumulate(x.begin(), x.end(), 0.0) / n;
        double ss = 0;
        for (double t : x) ss += (t - *mean) * (t - *mean);
        *sd = std::sqrt(ss / (n - 1));
    };
    mean_sd(job.step_time_s, &v.step_mean_s, &v.step_sd_s);

    std::array<double, kKernelClassCount> cv{};
    for (const ClassFit& c : fit.classes) cv[static_cast<std::size_t>(c.cls)] = c.fit.best.cv;
    std::map<std::uint32_t, std::vector<double>> sites;
    std::map<std::uint32_t, KernelClass> site_class;
    std::vector<double> kernel_time(static_cast<std::size_t>(v.steps), 0.0);
    for (const KernelInvocation& k : job.kernels) {
        if (k.rank != 0 || k.step >= static_cast<std::uint32_t>(v.steps)) continue;
        sites[k.site].push_back(k.duration_s);
        site_class[k.site] = k.cls;
        kernel_time[k.step] += k.duration_s;
    }
    mean_sd(kernel_time, &v.kernel_mean_s, &v.kernel_sd_s);
    double compute_var = 0, comm_var = 0, comm_time = 0;
    for (const auto& [site, durations] : sites) {
        const double m = median_of(durations);
        const double c = cv[static_cast<std::size_t>(site_class[site])];
        // Each invocation of the site, per step on average.
        const double per_step = static_cast<double>(durations.size()) / v.steps;
        const bool comm = is_communication(site_class[site]);
        (comm ? comm_var : compute_var) += per_step * m * m * c * c;
        if (comm) comm_time += per_step * m;
    }
    const double r = fit.regime ? fit.regime->cv : 0.0;
    comm_var += comm_time * comm_time * r * r;
    v.compute_sd_s = std::sqrt(compute_var);
    v.comm_sd_s = std::sqrt(comm_var);
    v.predicted_sd_s = std::sqrt(compute_var + comm_var);
    return v;
}

}  // namespace prism::fit
