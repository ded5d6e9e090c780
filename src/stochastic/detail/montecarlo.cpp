// Monte Carlo reference evaluator: draws the persistent factors of K cluster realizations, then
// for each sample the regime R and every chunk op of every replica, and runs the pipeline DAG.
// Replicas that cannot be the slowest (up to a failure probability of 1e-12 per replica, see
// slowest_replica) are not drawn; check_monte_carlo_pruning audits that in the tests.

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "src/stochastic/detail/evaluators.hpp"
#include "src/stochastic/step_distribution.hpp"

namespace prism::stochastic::detail {

namespace {

/// Group factors of cluster realization `id` (per stage with lockstep).
void cluster_factors(const StepModel& m, const PersistentLayout& layout, std::uint64_t seed,
                     std::uint64_t point_index, std::uint32_t id, std::vector<double>& g,
                     std::vector<double>& out) {
    if (m.persistent_deterministic) {
        out.assign(m.lockstep ? m.stages : static_cast<size_t>(m.stages) * m.dp, 1.0);
        return;
    }
    Stream stream(seed, point_index, StreamKind::cluster, id);
    draw_group_factors(m, layout, stream, g);
    if (!m.lockstep) {
        out = g;
        return;
    }
    out.assign(m.stages, 0.0);
    for (int s = 0; s < m.stages; ++s) {
        for (int r = 0; r < m.dp; ++r) out[s] = std::max(out[s], g[s * m.dp + r]);
    }
}

/// One step of the cluster with factors `gk`, using the sample stream `rng`.
class StepSampler {
  public:
    explicit StepSampler(const StepModel& m)
        : m_(m),
          dur_(m.pipeline.size()),
          xfer_(m.pipeline.size()),
          finish_(m.pipeline.size()),
          mean_f_(m.stages * m.chunks),
          sd_f_(mean_f_.size()),
          mean_b_(mean_f_.size()),
          sd_b_(mean_f_.size()),
          var_(m.pipeline.size()),
          xvar_(m.pipeline.size()),
          finish2_(m.pipeline.size()),
          op_j_(m.pipeline.size()),
          op_bwd_(m.pipeline.size()) {
        // longest paths of the comp and comm variances at g = R = 1 (the bound's V)
        const auto& ops = m.pipeline.ops();
        for (size_t i = 0; i < ops.size(); ++i) {
            op_j_[i] = ops[i].stage * m.chunks + ops[i].chunk;
            op_bwd_[i] = ops[i].backward ? 1 : 0;
        }
        for (const bool comm : {false, true}) {
            for (size_t i = 0; i < ops.size(); ++i) {
                const ChunkCost& k = (op_bwd_[i] ? m.bwd : m.fwd)[op_j_[i]];
                var_[i] = comm ? k.comm_var : k.comp_var;
                xvar_[i] = comm ? m.p2p.comm_var : m.p2p.comp_var;
            }
            const double start = comm ? m.dataloader.comm_var : m.dataloader.comp_var;
            (comm ? vcomm_ : vcomp_) =
                m.pipeline.makespan(var_.data(), xvar_.data(), start, finish_.data());
        }
    }

    double operator()(const std::vector<double>& gk, Stream& rng) {
        const auto& m = m_;
        const bool single = m.single.present;
        const double r = m.regime.is_constant() ? m.regime.mean() : m.regime.sample(rng.uniform());
        double slowest = 0;
        if (single || m.replicas == 1) {
            for (int rep = 0; rep < m.replicas; ++rep) {
                slowest = std::max(slowest, replica(gk, rep, r, rng));
            }
        } else {
            slowest = slowest_replica(gk, r, rng);
        }
        const double sync =
            std::max(0.0, m.sync.mean(1.0, r) + std::sqrt(m.sync.var(1.0, r)) * rng.normal32());
        const double opt = std::max(
            0.0, m.optimizer.mean(1.0, r) + std::sqrt(m.optimizer.var(1.0, r)) * rng.normal32());
        return slowest + std::max(0.0, sync - m.sync_overlap_s) + opt;
    }

  private:
    /// Means and sds of the chunk ops of replica `rep` given (g, R).
    void stage_costs(const std::vector<double>& gk, int rep, double r) {
        const auto& m = m_;
        const bool single = m.single.present;
        for (int s = 0; s < m.stages; ++s) {
            const double gg = m.lockstep ? gk[s] : gk[s * m.dp + rep];
            for (int c = 0; c < m.chunks; ++c) {
                const int i = s * m.chunks + c;
                mean_f_[i] = m.fwd[i].mean(gg, r);
                sd_f_[i] = single ? 0.0 : std::sqrt(m.fwd[i].var(gg, r));
                mean_b_[i] = m.bwd[i].mean(gg, r);
                sd_b_[i] = single ? 0.0 : std::sqrt(m.bwd[i].var(gg, r));
            }
        }
    }

    /// One replica's pipeline time: every chunk op and transfer drawn.
    double replica(const std::vector<double>& gk, int rep, double r, Stream& rng) {
        const auto& m = m_;
        const int v = m.chunks;
        const auto& ops = m.pipeline.ops();
        const size_t nops = ops.size();
        const bool single = m.single.present;
        const double p2p_mean = m.p2p.mean(1.0, r);
        const double p2p_sd = single ? 0.0 : std::sqrt(m.p2p.var(1.0, r));
        stage_costs(gk, rep, r);
        for (size_t i = 0; i < nops; ++i) {
            const auto& op = ops[i];
            const int j = op.stage * v + op.chunk;
            const double mu = op.backward ? mean_b_[j] : mean_f_[j];
            const double sd = op.backward ? sd_b_[j] : sd_f_[j];
            dur_[i] = sd > 0 ? std::max(0.0, mu + sd * rng.normal32()) : mu;
            if (op.input >= 0) {
                xfer_[i] =
                    p2p_sd > 0 ? std::max(0.0, p2p_mean + p2p_sd * rng.normal32()) : p2p_mean;
            }
        }
        const double dl_sd = single ? 0.0 : std::sqrt(m.dataloader.var(1.0, r));
        const double dl = std::max(0.0, m.dataloader.mean(1.0, r) + dl_sd * rng.normal32());
        double fin = m.pipeline.makespan(dur_.data(), xfer_.data(), dl, finish_.data());
        if (single) {
            // the replica's only random term, with its exact law
            const auto& t = m.single;
            const auto& x = m.transient[t.cls];
            const double u = rng.uniform();
            const double scale = t.comm ? r : gk[m.lockstep ? 0 : rep];
            const double draw = t.n == 1 ? x.sample(u) : x.max_quantile(u, t.n);
            fin += t.base_s * scale * (draw - x.max_moments(t.n).mean);
        }
        return fin;
    }

    /// The slowest of the d replicas, drawing only those that can be it. Replica rep's time is
    /// T = makespan(mu + e), e_i = max(sd_i Z_i, -mu_i); T <= M + max over paths of sum e_i,
    /// M = makespan(mu). Per path the sum is sub-Gaussian with variance proxy V_path <= V =
    /// the longest path in sd^2 (the clamp at 0 multiplies the moment generating function by at
    /// most exp(sum_i Phi(-mu_i / sd_i)), F), so by the union bound over the N paths of the
    /// schedule (Chernoff) P(T > M + b) <= N F exp(-b^2 / 2V) = eps at
    /// b = sqrt(2 V (ln N + ln F + ln(1 / eps))). Replicas are drawn in decreasing M; one whose
    /// bound M + b lies below the slowest drawn so far is skipped: it would have changed the
    /// max with probability < eps = 1e-12 (so < 1.3e-7 per 1,000 samples of 1,024 replicas).
    double slowest_replica(const std::vector<double>& gk, double r, Stream& rng) {
        const auto& m = m_;
        const int p = m.stages;
        const int v = m.chunks;
        const size_t nops = m.pipeline.size();
        const double p2p_mean = m.p2p.mean(1.0, r);
        const double p2p_var = m.p2p.var(1.0, r);
        const double dl_mean = m.dataloader.mean(1.0, r);
        const double dl_var = m.dataloader.var(1.0, r);
        constexpr double kLogInvEps = 27.631021115928547;  // ln 1e12
        // Phi(-mu / sd), bounded by Phi(-8.5) < 1e-17 without erfc when mu >= 8.5 sd
        auto clamp_mass = [](double mu, double var) {
            if (!(var > 0)) return 0.0;
            if (mu > 0 && mu * mu >= 72.25 * var) return 1e-17;
            return normal_cdf(-mu / std::sqrt(var));
        };
        const double f_common =
            static_cast<double>(nops) * clamp_mass(p2p_mean, p2p_var) + clamp_mass(dl_mean, dl_var);
        for (size_t i = 0; i < nops; ++i) xfer_[i] = p2p_mean;
        bound_.resize(m.replicas);
        order_.resize(m.replicas);
        const double n = m.microbatches;
        for (int rep = 0; rep < m.replicas; ++rep) {
            double f = f_common;
            double gmax = 1.0;
            for (int s = 0; s < p; ++s) {
                const double gg = gk[s * m.dp + rep];
                gmax = std::max(gmax, gg);
                for (int c = 0; c < v; ++c) {
                    const int i = s * v + c;
                    mean_f_[i] = m.fwd[i].mean(gg, r);
                    mean_b_[i] = m.bwd[i].mean(gg, r);
                    f += n * (clamp_mass(mean_f_[i], m.fwd[i].var(gg, r)) +
                              clamp_mass(mean_b_[i], m.bwd[i].var(gg, r)));
                }
            }
            for (size_t i = 0; i < nops; ++i) {
                dur_[i] = op_bwd_[i] ? mean_b_[op_j_[i]] : mean_f_[op_j_[i]];
            }
            const double mk =
                m.pipeline.makespan(dur_.data(), xfer_.data(), dl_mean, finish_.data());
            // longest path in sd^2 <= max(1, gmax)^2 (comp part) + r^2 (comm part), both
            // longest paths precomputed: sd^2 = g^2 comp_var + r^2 comm_var per op
            const double vk = gmax * gmax * vcomp_ + r * r * vcomm_;
            const double b =
                std::sqrt(2.0 * vk * (m.pipeline.log_paths() + std::log1p(f) + kLogInvEps));
            bound_[rep] = mk + b;
            order_[rep] = {mk, rep};
        }
        std::sort(order_.begin(), order_.end(), std::greater<>());
        double slowest = -1.0;
        std::vector<int> skipped;
        for (const auto& [mk, rep] : order_) {
            if (bound_[rep] < slowest) {
                if (check_ != nullptr) skipped.push_back(rep);
                continue;
            }
            slowest = std::max(slowest, replica(gk, rep, r, rng));
        }
        if (check_ != nullptr) {
            // draw the skipped replicas too: none may exceed the max of the drawn ones
            check_->replicas += m.replicas;
            check_->skipped += static_cast<std::int64_t>(skipped.size());
            for (const int rep : skipped) {
                if (replica(gk, rep, r, rng) > slowest) ++check_->violations;
            }
        }
        return slowest;
    }

  public:
    PruningCheck* check_ = nullptr;

  private:
  private:
    const StepModel& m_;
    std::vector<double> dur_, xfer_, finish_, mean_f_, sd_f_, mean_b_, sd_b_;
    std::vector<double> var_, xvar_, finish2_, bound_;
    std::vector<int> op_j_;
    std::vector<std::uint8_t> op_bwd_;
    double vcomp_ = 0, vcomm_ = 0;
    std::vector<std::pair<double, int>> order_;
};

}  // namespace

std::vector<double> monte_carlo(const StepModel& m, const PersistentLayout& layout, int samples,
                                std::uint64_t seed, std::uint64_t point_index) {
    // every sample is a step on its own cluster realization: the marginal distribution
    StepSampler sample(m);
    std::vector<double> g, gk;
    std::vector<double> out(samples);
    for (int k = 0; k < samples; ++k) {
        cluster_factors(m, layout, seed, point_index, static_cast<std::uint32_t>(k), g, gk);
        Stream rng(seed, point_index, StreamKind::sample, static_cast<std::uint32_t>(k));
        out[k] = sample(gk, rng);
    }
    return out;
}

PruningCheck check_monte_carlo_pruning(const StepModel& m, const PersistentLayout& layout,
                                       int samples, std::uint64_t seed, std::uint64_t point_index) {
    PruningCheck check;
    StepSampler sample(m);
    sample.check_ = &check;
    std::vector<double> g, gk;
    for (int k = 0; k < samples; ++k) {
        cluster_factors(m, layout, seed, point_index, static_cast<std::uint32_t>(k), g, gk);
        Stream rng(seed, point_index, StreamKind::sample, static_cast<std::uint32_t>(k));
        sample(gk, rng);
    }
    return check;
}

void monte_carlo_clusters(const StepModel& m, const PersistentLayout& layout, int clusters,
                          int per_cluster, std::uint64_t seed, std::uint64_t point_index,
                          std::vector<double>& mean_s, std::vector<double>& var_s2) {
    StepSampler sample(m);
    std::vector<double> g, gk;
    mean_s.assign(clusters, 0.0);
    var_s2.assign(clusters, 0.0);
    for (int c = 0; c < clusters; ++c) {
        // cluster ids and sample ids above those of monte_carlo's marginal samples
        const auto id = static_cast<std::uint32_t>(0x800000u + c);
        cluster_factors(m, layout, seed, point_index, id, g, gk);
        double s1 = 0, s2 = 0;
        for (int j = 0; j < per_cluster; ++j) {
            Stream rng(seed, point_index, StreamKind::sample, id + 0x10000u * (j + 1));
            const double x = sample(gk, rng);
            s1 += x;
            s2 += x * x;
        }
        mean_s[c] = s1 / per_cluster;
        var_s2[c] =
            per_cluster > 1 ? std::max(0.0, (s2 - s1 * s1 / per_cluster) / (per_cluster - 1)) : 0.0;
    }
}

namespace {

double sorted_quantile(const std::vector<double>& x, double p) {
    // linear interpolation between order statistics (Hyndman-Fan type 7)
    const double h = (static_cast<double>(x.size()) - 1) * p;
    const auto lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, x.size() - 1);
    return x[lo] + (h - static_cast<double>(lo)) * (x[hi] - x[lo]);
}

}  // namespace

void summarize_samples(std::vector<double> x, const EvaluationSpec& eval, double det,
                       StepDistribution& out) {
    const auto n = static_cast<double>(x.size());

    double mean = 0;
    for (double v : x) mean += v;
    mean /= n;
    double var = 0;
    for (double v : x) var += (v - mean) * (v - mean);
    out.mean_s = mean;
    out.std_s = std::sqrt(var / std::max(1.0, n - 1));
    std::sort(x.begin(), x.end());
    out.p50_s = sorted_quantile(x, 0.50);
    out.p90_s = sorted_quantile(x, 0.90);
    out.p95_s = sorted_quantile(x, 0.95);
    out.p99_s = sorted_quantile(x, 0.99);
    out.p999_s = sorted_quantile(x, 0.999);
    out.p_slow.clear();
    for (double delta : eval.slow_deltas) {
        const double t = (1.0 + delta) * det;
        const auto above = x.end() - std::upper_bound(x.begin(), x.end(), t);
        out.p_slow.push_back(static_cast<double>(above) / n);
    }
    out.histogram.clear();
    if (eval.histogram && eval.histogram_bins > 0) {
        out.histogram_lo_s = x.front();
        out.histogram_hi_s = x.back() > x.front() ? x.back() : x.front() * (1 + 1e-12) + 1e-300;
        out.histogram.assign(eval.histogram_bins, 0.0f);
        const double w = (out.histogram_hi_s - out.histogram_lo_s) / eval.histogram_bins;
        for (double v : x) {
            const auto b = std::clamp(static_cast<int>((v - out.histogram_lo_s) / w), 0,
                                      eval.histogram_bins - 1);
            out.histogram[b] += static_cast<float>(1.0 / n);
        }
    }
}

}  // namespace prism::stochastic::detail
