#include "explorer/front_verification.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>

#include <fmt/format.h>

#include "explorer/messages.hpp"
#include "io/verify_store.hpp"
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

template <class T>
std::string to_bytes(const std::vector<T>& v) {
    std::string bytes(v.size() * sizeof(T), '\0');
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
}

template <class T>
std::vector<T> from_bytes(const std::string& bytes) {
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
}

/// Figures of the points front[first], front[first + stride], ...; NaN for a point that
/// fails. Stops early (returns false) when `stop` becomes non-zero.
bool verify_share(const Experiment& e, const DesignSpace& space,
                  const std::vector<std::uint64_t>& front, std::size_t first, std::size_t stride,
                  const std::atomic<int>* stop, std::vector<double>& figures) {
    for (std::size_t k = first; k < front.size(); k += stride) {
        if (stop != nullptr && stop->load() != 0) return false;
        const std::uint64_t index = front[k];
        double* out = figures.data() + k * kFigures;
        try {
            to_figures(verify_point(e, space.decode(index).point, space.stream_index(index)), out);
        } catch (const std::exception& err) {
            std::cerr << fmt::format("prism: warning: verify: point {}: {}\n", index, err.what());
            std::fill(out, out + kFigures, std::numeric_limits<double>::quiet_NaN());
        }
    }
    return true;
}

}  // namespace

bool verify_front(const Experiment& experiment, const DesignSpace& space,
                  const std::vector<std::uint64_t>& front, const std::string& path,
                  const MpiEnvironment& mpi, const std::atomic<int>* stop, std::ostream& log,
                  bool quiet) {
    const int samples = experiment.evaluation.samples;
    const auto workers = static_cast<std::size_t>(mpi.size() - 1);
    for (std::size_t w = 1; w <= workers; ++w) {
        send_bytes(static_cast<int>(w), static_cast<int>(Tag::verify), to_bytes(front));
    }
    if (front.empty()) return true;
    if (!quiet) {
        log << fmt::format(
            "verify: {} Pareto-front points by Monte Carlo ({} samples each, {} process{})\n",
            front.size(), samples, std::max<std::size_t>(workers, 1), workers > 1 ? "es" : "");
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<double> figures(front.size() * kFigures);
    if (workers == 0) {
        if (!verify_share(experiment, space, front, 0, 1, stop, figures)) return false;
    } else {
        for (std::size_t received = 0; received < workers;) {
            const Envelope env = receive_polling();
            if (env.tag != static_cast<int>(Tag::verify)) continue;
            const auto w = static_cast<std::size_t>(env.source);
            const auto share = from_bytes<double>(env.bytes);
            std::size_t j = 0;
            for (std::size_t k = w - 1; k < front.size() && j + kFigures <= share.size();
                 k += workers, j += kFigures) {
                std::copy(share.begin() + static_cast<std::ptrdiff_t>(j),
                          share.begin() + static_cast<std::ptrdiff_t>(j + kFigures),
                          figures.begin() + static_cast<std::ptrdiff_t>(k * kFigures));
            }
            ++received;
        }
    }
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
    return true;
}

void verify_front_worker(const Experiment& experiment, const DesignSpace& space,
                         const MpiEnvironment& mpi) {
    Envelope env;
    do {
        env = receive_polling(0);
    } while (env.tag != static_cast<int>(Tag::verify));
    const auto front = from_bytes<std::uint64_t>(env.bytes);
    if (front.empty()) return;
    const auto workers = static_cast<std::size_t>(mpi.size() - 1);
    const auto me = static_cast<std::size_t>(mpi.rank() - 1);
    std::vector<double> figures(front.size() * kFigures);
    verify_share(experiment, space, front, me, workers, nullptr, figures);
    std::vector<double> share;
    for (std::size_t k = me; k < front.size(); k += workers) {
        share.insert(share.end(), figures.begin() + static_cast<std::ptrdiff_t>(k * kFigures),
                     figures.begin() + static_cast<std::ptrdiff_t>((k + 1) * kFigures));
    }
    send_bytes(0, static_cast<int>(Tag::verify), to_bytes(share));
}

}  // namespace prism::explorer
