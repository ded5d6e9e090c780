#pragma once

// PyTorch profiler (Kineto) Chrome traces, plain or gzip: the GPU kernels with their model
// kernel class, the profiler steps, and the rank's place in its job. The format: a JSON
// object whose "traceEvents" array holds complete events ("ph": "X") with "cat", "name", "ts"
// and "dur" in microseconds; GPU kernels have cat "kernel" and args "correlation", "grid",
// "block", "stream"; the CPU launch (cat "cuda_runtime") carries the same correlation;
// "ProfilerStep#N" annotations (cat "user_annotation" or "cpu_op") span each step on the CPU;
// "distributedInfo" gives the rank and world size.

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "src/fit/trace_fit.hpp"
#include "src/model/spec.hpp"

namespace prism::io {

/// One profiler step, ProfilerStep#<number>, as the CPU annotation spans it.
struct TraceStep {
    std::int64_t number = 0;
    double start_s = 0;  ///< trace clock
    double duration_s = 0;
};

/// One GPU kernel (or memory copy/set) execution.
struct TraceKernel {
    std::uint32_t name_id = 0;             ///< into KinetoTrace::names
    std::optional<KernelClass> cls;        ///< nullopt: no model class (broadcast, ...)
    std::array<std::int32_t, 6> launch{};  ///< grid x, y, z and block x, y, z (0 if absent)
    std::int32_t stream = -1;
    std::int32_t step = -1;  ///< index into KinetoTrace::steps by launch time; -1 = outside
    double launch_s = 0;     ///< CPU launch time (the kernel's start where none is linked)
    double start_s = 0;
    double duration_s = 0;
};

struct KinetoTrace {
    std::string path;
    int rank = -1;  ///< distributedInfo.rank; -1 when absent
    int world_size = 0;
    std::string device;                ///< deviceProperties[0].name
    double resolution_s = 0;           ///< 1 us when every kernel duration is a whole microsecond
    std::vector<TraceStep> steps;      ///< in time order
    std::vector<std::string> names;    ///< kernel names, interned
    std::vector<TraceKernel> kernels;  ///< in start order
};

/// Reads a Kineto trace (.json or .json.gz; at most kMaxTraceBytes of JSON, io/work_limits.hpp).
/// Throws ConfigError (bad input) naming the file for a missing, unreadable, too large or
/// corrupt file, JSON that does not parse (a truncated file), a document without a
/// "traceEvents" array (unknown schema), an event time that is not finite or a negative
/// duration, a profiler step of no time, a trace without GPU kernels or without ProfilerStep#N
/// annotations.
KinetoTrace read_kineto_trace(const std::filesystem::path& path);

/// Groups traces into jobs and numbers each kernel's call site: traces with the same world
/// size and the same profiler step numbers but different ranks are ranks of one job; every
/// other trace is a job of its own. A site is (name, launch shape, the kernel's order among
/// equal kernels launched in the step on its rank). Kernels outside every step or without a
/// model class are left out.
std::vector<fit::TracedJob> traced_jobs(const std::vector<KinetoTrace>& traces);

}  // namespace prism::io
