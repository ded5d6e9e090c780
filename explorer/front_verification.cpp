#include "explorer/front_verification.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "explorer/messages.hpp"
#include "io/verify_store.hpp"
#include "src/model/deterministic.hpp"
#include "src/model/evaluate.hpp"

namespace prism::explorer {

namespace {

/// Figures per point on the wire: ks, then mean, p50, p95, p99 analytic and Monte Carlo.
constexpr std::size_t kFigures = 9;

void to_figures(const stochastic::Verification& v, double* out) {
    const double x[kFigures] = {
        v.ks,        v.analytic_mean_s, v.analytic_p50_s, v.analytic_p95_s, v.analytic_p99_s,
        v.mc_mean_s, v.mc_p50_s,        v.mc_p95_s,       v.mc_p99_s};
    std::copy(x, x + kFigures, out);
}

stochastic::Verification from_figures(const double* x, int samples) {
    stochastic::Verification v;
    v.samples = samples;
    v.ks = x[0];
    v.analytic_mean_s = x[1];
    v.analytic_p50_s = x[2];
    v.analytic_p95_s = x[3];
    v.analytic_p99_s = x[4];
    v.mc_mean_s = x[5];
    v.mc_p50_s = x[6];
    v.mc_p95_s = x[7];
    v.mc_p99_s = x[8];
    return v;
}

}  // namespace

std::vector<std::size_t> same_law_as(const Experiment& experiment, const DesignSpace& space,
                                     const std::vector<std::uint64_t>& front) {
    std::vector<std::size_t> rep(front.size());
    std::vector<DesignPoint> points(front.size());
    // (unique_ptr, not optional: GCC 12 reports a false -Wfree-nonheap-object on a vector of
    // optional<StepProfile> at some sizes of StepProfile)
    std::vector<std::unique_ptr<StepProfile>> profiles(front.size());
    for (std::size_t k = 0; k < front.size(); ++k) {
        rep[k] = k;
        points[k] = space.decode(front[k]).point;
        const DeterministicResult det = evaluate_deterministic(experiment, points[k]);
        if (det.feasible) profiles[k] = std::make_unique<StepProfile>(det.profile);
        if (!profiles[k]) continue;
        for (std::size_t j = 0; j < k; ++j) {
            if (rep[j] != j || !profiles[j]) continue;
            DesignPoint p = points[k];
            p.zero_stage = points[j].zero_stage;
            if (p == points[j] && *profiles[k] == *profiles[j]) {
                rep[k] = j;
                break;
            }
        }
    }
    return rep;
}

namespace {

/// Test hook: PRISM_TEST_VERIFY_DELAY_MS makes each point's verification this much slower (the
/// signal and time-limit tests need a verification that lasts).
void test_delay() {
    static const double delay_ms = [] {
        const char* env = std::getenv("PRISM_TEST_VERIFY_DELAY_MS");
        return env != nullptr ? std::atof(env) : 0.0;
    }();
    if (delay_ms > 0)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms));
}

/// Figures of front point `index`; NaN for a point the evaluators cannot run (with a warning).
/// Throws stochastic::VerificationStopped when `stop` says so between the point's stages.
void verify_one(const Experiment& e, const DesignSpace& space, std::uint64_t index, double* out,
                const StopRequested& stop) {
    try {
        test_delay();
        to_figures(verify_point(e, space.decode(index).point, space.stream_index(index), stop),
                   out);
    } catch (const stochastic::VerificationStopped&) {
        throw;
    } catch (const std::exception& err) {
        std::cerr << fmt::format("prism: warning: verify: point {}: {}\n", index, err.what());
        std::fill(out, out + kFigures, std::numeric_limits<double>::quiet_NaN());
    }
}

/// Wire format: a task is (position in the front, index) as two uint64s, an empty message
/// releases the worker; a reply is the position (one uint64) and the point's figures.
std::string task(std::uint64_t position, std::uint64_t index) {
    std::string bytes(2 * sizeof(std::uint64_t), '\0');
    std::memcpy(bytes.data(), &position, sizeof position);
    std::memcpy(bytes.data() + sizeof position, &index, sizeof index);
    return bytes;
}

/// Master with workers: one point at a time to whichever worker is free (points differ in
/// cost by 10x and more), polling with sleeps; fills `figures` by position. Once `stop` says
/// so, no more points go out and each worker is released as its point comes back; a worker
/// still busy `grace_s` later is given up on (the caller ends the job).
VerifyOutcome verify_on_workers(const std::vector<std::uint64_t>& front, std::size_t workers,
                                std::vector<double>& figures, const StopRequested& stop,
                                double grace_s) {
    using Clock = std::chrono::steady_clock;
    std::size_t next = 0;
    std::size_t busy = 0;
    bool stopping = false;
    Clock::time_point stop_time{};
    for (std::size_t w = 1; w <= workers; ++w) {
        if (next < front.size()) {
            send_bytes(static_cast<int>(w), static_cast<int>(Tag::verify), task(next, front[next]));
            ++next;
            ++busy;
        } else {
            send_bytes(static_cast<int>(w), static_cast<int>(Tag::verify), std::string());
        }
    }
    constexpr std::size_t kReply = sizeof(std::uint64_t) + kFigures * sizeof(double);
    BackoffReceiver receiver;
    while (busy > 0) {
        if (!stopping && stop && stop()) {
            stopping = true;
            stop_time = Clock::now();
        }
        if (stopping && std::chrono::duration<double>(Clock::now() - stop_time).count() > grace_s) {
            return VerifyOutcome::workers_busy;
        }
        auto message = receiver.next();
        if (!message) continue;
        const Envelope& env = *message;
        if (env.tag != static_cast<int>(Tag::verify) || env.bytes.size() != kReply) continue;
        std::uint64_t position = 0;
        std::memcpy(&position, env.bytes.data(), sizeof position);
        if (position < front.size()) {
            std::memcpy(figures.data() + position * kFigures, env.bytes.data() + sizeof position,
                        kFigures * sizeof(double));
        }
        if (!stopping && next < front.size()) {
            send_bytes(env.source, static_cast<int>(Tag::verify), task(next, front[next]));
            ++next;
        } else {
            send_bytes(env.source, static_cast<int>(Tag::verify), std::string());
            --busy;
        }
    }
    return stopping ? VerifyOutcome::stopped : VerifyOutcome::written;
}

}  // namespace

void release_verify_workers(const MpiEnvironment& mpi) {
    for (int w = 1; w < mpi.size(); ++w)
        send_bytes(w, static_cast<int>(Tag::verify), std::string());
}

VerifyOutcome verify_front(const Experiment& experiment, const DesignSpace& space,
                           const std::vector<std::uint64_t>& front, const std::string& path,
                           const MpiEnvironment& mpi, const StopRequested& stop, std::ostream& log,
                           bool quiet, double grace_s) {
    const int samples = experiment.evaluation.samples;
    const auto workers = static_cast<std::size_t>(mpi.size() - 1);
    if (!quiet) {
        log << fmt::format(
            "verify: {} Pareto-front points by Monte Carlo ({} samples each, {} process{})\n",
            front.size(), samples, std::max<std::size_t>(workers, 1), workers > 1 ? "es" : "");
    }
    const auto t0 = std::chrono::steady_clock::now();
    // points of one law (equal but for the ZeRO stage, equal step profiles) verified once
    const std::vector<std::size_t> rep = same_law_as(experiment, space, front);
    std::vector<std::uint64_t> distinct;
    std::vector<std::size_t> slot(front.size());
    for (std::size_t k = 0; k < front.size(); ++k) {
        if (rep[k] == k) {
            slot[k] = distinct.size();
            distinct.push_back(front[k]);
        } else {
            slot[k] = slot[rep[k]];
        }
    }
    if (!quiet && distinct.size() < front.size()) {
        log << fmt::format(
            "verify: {} of them share the step-time law of another front point (equal but for "
            "the ZeRO stage, equal step profiles): verified once\n",
            front.size() - distinct.size());
    }
    std::vector<double> once(distinct.size() * kFigures);
    if (workers == 0) {
        try {
            for (std::size_t k = 0; k < distinct.size(); ++k) {
                if (stop && stop()) return VerifyOutcome::stopped;
                verify_one(experiment, space, distinct[k], once.data() + k * kFigures, stop);
            }
        } catch (const stochastic::VerificationStopped&) {
            return VerifyOutcome::stopped;
        }
    } else {
        const VerifyOutcome outcome = verify_on_workers(distinct, workers, once, stop, grace_s);
        if (outcome != VerifyOutcome::written) return outcome;
    }
    std::vector<double> figures(front.size() * kFigures);
    for (std::size_t k = 0; k < front.size(); ++k) {
        std::copy_n(once.data() + slot[k] * kFigures, kFigures, figures.data() + k * kFigures);
    }
    if (stop && stop()) return VerifyOutcome::stopped;  // a stop during the last point
    std::vector<io::VerifiedPoint> rows(front.size());
    double worst_ks = 0, worst_p95 = 0;
    for (std::size_t k = 0; k < front.size(); ++k) {
        rows[k].index = front[k];
        rows[k].verification = from_figures(figures.data() + k * kFigures, samples);
        const auto& v = rows[k].verification;
        if (!std::isnan(v.ks)) {
            worst_ks = std::max(worst_ks, v.ks);
            worst_p95 = std::max(worst_p95, std::fabs(v.analytic_p95_s / v.mc_p95_s - 1));
        }
    }
    io::write_verification(path, samples, std::move(rows));
    if (!quiet) {
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        log << fmt::format(
            "verify: {} points in {:.2f} s; largest KS {:.4f}, largest p95 difference {:.2f}% "
            "(written to /verify)\n",
            front.size(), s, worst_ks, 100 * worst_p95);
    }
    return VerifyOutcome::written;
}

void verify_front_worker(const Experiment& experiment, const DesignSpace& space) {
    for (;;) {
        const Envelope env = receive_polling(0);
        if (env.tag != static_cast<int>(Tag::verify)) continue;
        if (env.bytes.size() != 2 * sizeof(std::uint64_t)) return;  // released
        std::uint64_t position = 0, index = 0;
        std::memcpy(&position, env.bytes.data(), sizeof position);
        std::memcpy(&index, env.bytes.data() + sizeof position, sizeof index);
        std::string reply(sizeof position + kFigures * sizeof(double), '\0');
        std::memcpy(reply.data(), &position, sizeof position);
        double figures[kFigures];
        verify_one(experiment, space, index, figures, {});
        std::memcpy(reply.data() + sizeof position, figures, sizeof figures);
        send_bytes(0, static_cast<int>(Tag::verify), reply);
    }
}

}  // namespace prism::explorer
