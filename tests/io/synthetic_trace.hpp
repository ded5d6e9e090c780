#pragma once

// Synthetic PyTorch profiler (Kineto) traces with known kernel durations, for the trace reader
// and trace-fit tests: every kernel's duration is its base times a lognormal factor of a stated
// cv, times a rank factor (compute kernels) or a per-step regime factor (collectives).

#include <zlib.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace prism::testing {

struct SyntheticKernel {
    std::string name;
    double base_us = 100;
    double cv = 0;           ///< lognormal, mean 1
    int sites = 1;           ///< distinct launch shapes (each its own base: base x (1 + 0.5 site))
    std::string collective;  ///< if set: an NCCL kernel inside an "nccl:<collective>" annotation
};

struct SyntheticTrace {
    int rank = 0;
    int world_size = 1;
    int steps = 6;
    int first_step = 10;
    double rank_factor = 1;           ///< multiplies compute kernels
    std::vector<double> step_regime;  ///< per step, multiplies collectives (empty = 1)
    bool whole_microseconds = false;  ///< durations rounded to 1 us (as some Kineto versions)
    std::vector<SyntheticKernel> kernels;
    std::uint64_t seed = 1;
};

inline std::lognormal_distribution<double> unit_lognormal(double cv) {
    const double s2 = std::log1p(cv * cv);
    return std::lognormal_distribution<double>(-0.5 * s2, std::sqrt(s2));
}

/// The trace's JSON text; each step lasts the sum of its kernels plus 1 ms of host time.
inline std::string synthetic_trace_json(const SyntheticTrace& t) {
    std::mt19937_64 rng(t.seed);
    std::string events;
    const auto add = [&](const std::string& e) { events += (events.empty() ? "" : ",\n") + e; };
    double cpu = 1000;
    double gpu = 1500;
    std::int64_t corr = 100;
    for (int s = 0; s < t.steps; ++s) {
        const double step_start = cpu;
        const double regime = t.step_regime.empty() ? 1.0 : t.step_regime.at(std::size_t(s));
        for (const SyntheticKernel& k : t.kernels) {
            auto x = unit_lognormal(k.cv);
            for (int site = 0; site < k.sites; ++site) {
                double dur = k.base_us * (1 + 0.5 * site) * (k.cv > 0 ? x(rng) : 1.0);
                dur *= k.collective.empty() ? t.rank_factor : regime;
                if (t.whole_microseconds) dur = std::max(1.0, std::round(dur));
                ++corr;
                if (!k.collective.empty()) {
                    add(fmt::format(
                        R"({{"ph": "X", "cat": "cpu_op", "name": "nccl:{}", "pid": 7, "tid": 7, "ts": {:.3f}, "dur": 3.0}})",
                        k.collective, cpu - 1));
                }
                add(fmt::format(
                    R"({{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": {:.3f}, "dur": 4.0, "args": {{"correlation": {}}}}})",
                    cpu, corr));
                add(fmt::format(
                    R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, "ts": {:.3f}, "dur": {}, "args": {{"device": 0, "stream": 7, "correlation": {}, "grid": [{}, 1, 1], "block": [128, 1, 1]}}}})",
                    k.name, gpu,
                    t.whole_microseconds ? fmt::format("{:.0f}", dur) : fmt::format("{:.3f}", dur),
                    corr, 64 + site));
                cpu += 5;
                gpu += dur + 2;
            }
        }
        cpu = std::max(cpu, gpu) + 1000;
        add(fmt::format(
            R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "pid": 7, "tid": 7, "ts": {:.3f}, "dur": {:.3f}}})",
            t.first_step + s, step_start, cpu - step_start - 1));
        gpu = cpu + 500;
    }
    return fmt::format(
        R"({{"schemaVersion": 1, "deviceProperties": [{{"id": 0, "name": "Synthetic GPU"}}], "distributedInfo": {{"backend": "nccl", "rank": {}, "world_size": {}}}, "traceEvents": [
{}
]}})",
        t.rank, t.world_size, events);
}

/// A path under the system's temporary directory, in `dir` (created).
inline std::string scratch_path(const std::string& dir, const std::string& name) {
    const std::filesystem::path d = std::filesystem::temp_directory_path() / dir;
    std::filesystem::create_directories(d);
    return (d / name).string();
}

inline void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline void write_gzip(const std::string& path, const std::string& text) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
}

}  // namespace prism::testing
