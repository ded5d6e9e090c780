#include "src/run/run_montecarlo.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "src/common/error.hpp"
#include "src/run/detail/philox_stream.hpp"

namespace prism {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// Failure arrivals of the whole job in wall-clock time, in increasing order.
class FailureArrivals {
  public:
    FailureArrivals(const FailureSpec& spec, std::int64_t gpus, int gpus_per_node,
                    detail::PhiloxStream& rng)
        : rng_(&rng) {
        const std::int64_t nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
        for (const FailureCause& c : spec.causes) {
            const std::int64_t units = c.per_node ? nodes : gpus;
            if (c.weibull_shape == 1.0) {
                exp_rate_per_s_ += static_cast<double>(units) / c.mtbf_s;
                continue;
            }
            // Weibull(shape k, scale s) lifetimes with mean MTBF; every unit is a renewal process
            // in its stationary state at t = 0: the first arrival is the forward recurrence time
            // U * L, L length-biased, for which (L / s)^k ~ Gamma(1 + 1/k).
            const double k = c.weibull_shape;
            const double scale = c.mtbf_s / std::tgamma(1.0 + 1.0 / k);
            const int id = static_cast<int>(weibull_.size());
            weibull_.push_back({scale, k});
            for (std::int64_t u = 0; u < units; ++u) {
                const double length = scale * std::pow(rng.gamma(1.0 + 1.0 / k), 1.0 / k);
                heap_.emplace(rng.uniform() * length, id);
            }
        }
        next_exp_s_ = exp_rate_per_s_ > 0 ? rng.exponential() / exp_rate_per_s_ : kInf;
    }

    double peek() const {
        return heap_.empty() ? next_exp_s_ : std::min(next_exp_s_, heap_.top().first);
    }

    /// Consumes the next arrival and schedules that unit's (or the Poisson stream's) next one.
    void pop() {
        if (heap_.empty() || next_exp_s_ <= heap_.top().first) {
            next_exp_s_ += rng_->exponential() / exp_rate_per_s_;
            return;
        }
        const auto [t, id] = heap_.top();
        heap_.pop();
        const Weibull& w = weibull_[static_cast<std::size_t>(id)];
        heap_.emplace(t + w.scale * std::pow(rng_->exponential(), 1.0 / w.shape), id);
    }

  private:
    struct Weibull {
        double scale;
        double shape;
    };
    using Entry = std::pair<double, int>;
    detail::PhiloxStream* rng_;
    double exp_rate_per_s_ = 0;
    double next_exp_s_ = kInf;
    std::vector<Weibull> weibull_;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

struct Progress {
    std::int64_t steps = 0;
    double work_s = 0;
};

}  // namespace

std::vector<RunSample> simulate_runs(const RunInput& input, int samples, std::uint64_t seed,
                                     std::uint64_t point_index) {
    const CheckpointPlan plan = plan_checkpoints(input);
    if (samples <= 0) throw ModelError(fmt::format("run: samples must be > 0 (got {})", samples));
    std::vector<double> means = input.cluster_mean_s;
    std::vector<double> vars = input.cluster_var_s2;
    if (means.empty()) {
        means.push_back(input.deterministic_step_s);
        vars.push_back(0.0);
    }
    double mean_step_s = 0;
    for (double m : means) mean_step_s += m;
    mean_step_s /= static_cast<double>(means.size());
    const std::int64_t n = input.steps;
    const std::int64_t steps_per_segment =
        plan.enabled
            ? std::max<std::int64_t>(
                  1, std::llround(std::min(plan.interval_s / mean_step_s, static_cast<double>(n))))
            : n;

    // Asynchronous checkpoints are simulated as they happen (a failure loses the write in
    // flight), not by the fast path's rule of one extra write time of downtime per failure.
    const bool async = input.failures.async_checkpoint;
    const double detection_s = input.failures.detection_s;

    std::vector<RunSample> out(static_cast<std::size_t>(samples));
    for (int i = 0; i < samples; ++i) {
        detail::PhiloxStream rng(seed, point_index, static_cast<std::uint64_t>(i));
        const std::size_t k = static_cast<std::size_t>(i) % means.size();
        // Compute time of s steps of this realization: the CLT sum (s >= tens of steps).
        auto compute_s = [&](std::int64_t s) {
            const double sd = std::sqrt(static_cast<double>(s) * vars[k]);
            return std::max(0.0, static_cast<double>(s) * means[k] + sd * rng.normal());
        };
        RunSample& r = out[static_cast<std::size_t>(i)];
        if (!plan.enabled) {
            r.run_time_s = r.work_s = compute_s(n);
            continue;
        }
        FailureArrivals arrivals(input.failures, input.gpus, input.gpus_per_node, rng);
        // Progress (steps, their compute time) reached, in the last committed checkpoint, and in
        // the asynchronous write still in flight (commits `commit_s` after its snapshot).
        Progress reached;
        Progress committed;
        Progress in_flight;
        double in_flight_commit_s = kInf;
        double t = 0;
        while (reached.steps < n) {
            const std::int64_t s = std::min(steps_per_segment, n - reached.steps);
            const double work = compute_s(s);
            const double window = work + plan.blocking_s;
            if (arrivals.peek() >= t + window) {
                t += window;
                reached.steps += s;
                reached.work_s += work;
                ++r.checkpoints;
                if (async) {
                    // A newer snapshot replaces a write that has not committed yet.
                    if (in_flight_commit_s <= t) committed = in_flight;
                    in_flight = reached;
                    in_flight_commit_s = t + plan.commit_s;
                } else {
                    committed = reached;
                }
                continue;
            }
            // Roll back to the last committed checkpoint; detect (no failure strikes), then
            // restart until one succeeds.
            t = arrivals.peek();
            arrivals.pop();
            ++r.interruptions;
            if (in_flight_commit_s <= t) committed = in_flight;
            in_flight_commit_s = kInf;
            reached = committed;
            for (;;) {
                t += detection_s;
                while (arrivals.peek() < t) arrivals.pop();
                if (arrivals.peek() >= t + plan.recovery_s) {
                    t += plan.recovery_s;
                    break;
                }
                t = arrivals.peek();
                arrivals.pop();
                ++r.interruptions;
            }
        }
        r.work_s = reached.work_s;
        r.run_time_s = t;
    }
    return out;
}

}  // namespace prism
