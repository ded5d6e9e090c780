#include "io/trace_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>

#include "io/detail/gzip_file.hpp"
#include "io/detail/kernel_class.hpp"
#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::io {

namespace {

namespace dom = simdjson::dom;

constexpr double kMicro = 1e-6;

// A CPU-side span: a kernel's launch call or an "nccl:<collective>" annotation.
struct CpuSpan {
    std::int64_t thread = 0;  // pid and tid folded together
    double start_us = 0;
    double end_us = 0;
    std::string name;
};

std::string_view string_or(dom::element e, std::string_view key, std::string_view fallback = {}) {
    std::string_view out;
    if (e[key].get_string().get(out) != simdjson::SUCCESS) return fallback;
    return out;
}

std::int64_t id_of(dom::element e, std::string_view key) {
    dom::element v;
    if (e[key].get(v) != simdjson::SUCCESS) return 0;
    std::int64_t i = 0;
    if (v.get_int64().get(i) == simdjson::SUCCESS) return i;
    std::string_view s;
    if (v.get_string().get(s) == simdjson::SUCCESS) {
        return static_cast<std::int64_t>(std::hash<std::string_view>{}(s));
    }
    return 0;
}

std::int64_t thread_of(dom::element e) { return id_of(e, "pid") * 1000003 + id_of(e, "tid"); }

// The event's "ts" and "dur" (us); throws for a kernel or step event without them, or with a
// time that is not finite or a negative duration.
std::pair<double, double> time_of(dom::element e, const std::string& path, std::size_t index,
                                  std::string_view name, bool* whole_us) {
    double ts = 0, dur = 0;
    if (e["ts"].get_double().get(ts) != simdjson::SUCCESS ||
        e["dur"].get_double().get(dur) != simdjson::SUCCESS) {
        throw ConfigError(fmt::format(
            "{}: traceEvents[{}] ('{}'): missing or non-numeric 'ts' or 'dur'", path, index, name));
    }
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0) {
        throw ConfigError(
            fmt::format("{}: traceEvents[{}] ('{}'): 'ts' {} and 'dur' {}: not a "
                        "finite time and a duration >= 0",
                        path, index, name, ts, dur));
    }
    if (whole_us != nullptr && dur != std::floor(dur)) *whole_us = false;
    return {ts, dur};
}

void read_launch_shape(dom::element args, TraceKernel& k) {
    for (int part = 0; part < 2; ++part) {
        dom::array dims;
        if (args[part == 0 ? "grid" : "block"].get_array().get(dims) != simdjson::SUCCESS) continue;
        int i = 0;
        for (dom::element d : dims) {
            std::int64_t v = 0;
            if (i < 3 && d.get_int64().get(v) == simdjson::SUCCESS) {
                k.launch[static_cast<std::size_t>(part * 3 + i)] = static_cast<std::int32_t>(v);
            }
            ++i;
        }
    }
    std::int64_t stream = -1;
    if (args["stream"].get_int64().get(stream) == simdjson::SUCCESS) {
        k.stream = static_cast<std::int32_t>(stream);
    }
}

dom::element parse_document(dom::parser& parser, const simdjson::padded_string& text,
                            const std::string& path) {
    dom::element doc;
    const simdjson::error_code error = parser.parse(text).get(doc);
    if (error != simdjson::SUCCESS) {
        throw ConfigError(fmt::format("{}: not valid JSON ({}); a truncated or corrupt trace?",
                                      path, simdjson::error_message(error)));
    }
    if (doc.type() != dom::element_type::OBJECT) {
        throw ConfigError(fmt::format(
            "{}: unknown schema: the document is not a JSON object (a PyTorch profiler / Kineto "
            "trace is an object with a \"traceEvents\" array)",
            path));
    }
    return doc;
}

void read_header(dom::element doc, KinetoTrace& trace) {
    dom::element info;
    if (doc["distributedInfo"].get(info) == simdjson::SUCCESS) {
        std::int64_t v = 0;
        if (info["rank"].get_int64().get(v) == simdjson::SUCCESS) trace.rank = static_cast<int>(v);
        if (info["world_size"].get_int64().get(v) == simdjson::SUCCESS) {
            trace.world_size = static_cast<int>(v);
        }
    }
    dom::array devices;
    if (doc["deviceProperties"].get_array().get(devices) == simdjson::SUCCESS) {
        for (dom::element d : devices) {
            trace.device = std::string(string_or(d, "name"));
            break;
        }
    }
}

// The collective an NCCL kernel belongs to: the "nccl:<name>" annotation on the launching
// thread that encloses the launch.
std::string enclosing_collective(const std::map<std::int64_t, std::vector<CpuSpan>>& spans,
                                 const CpuSpan& launch) {
    const auto it = spans.find(launch.thread);
    if (it == spans.end()) return {};
    const std::vector<CpuSpan>& v = it->second;
    auto after = std::upper_bound(v.begin(), v.end(), launch.start_us,
                                  [](double t, const CpuSpan& s) { return t < s.start_us; });
    while (after != v.begin()) {
        --after;
        if (after->end_us >= launch.start_us) return after->name;
        if (launch.start_us - after->start_us > 1e7) break;  // annotations do not nest that long
    }
    return {};
}

}  // namespace

KinetoTrace read_kineto_trace(const std::filesystem::path& file) {
    KinetoTrace trace;
    trace.path = file.string();
    const std::string& path = trace.path;
    const simdjson::padded_string text(detail::read_maybe_gzip(file, kMaxTraceBytes));
    dom::parser parser;
    const dom::element doc = parse_document(parser, text, path);
    dom::array events;
    if (doc["traceEvents"].get_array().get(events) != simdjson::SUCCESS) {
        throw ConfigError(fmt::format(
            "{}: unknown schema: no \"traceEvents\" array (not a PyTorch profiler / Kineto trace)",
            path));
    }
    read_header(doc, trace);
    if (trace.world_size < 0 ||
        (trace.world_size > 0 && (trace.rank < 0 || trace.rank >= trace.world_size))) {
        throw ConfigError(fmt::format(
            "{}: distributedInfo: rank {} is not a rank of a job of world_size {} (0 to {})", path,
            trace.rank, trace.world_size, trace.world_size - 1));
    }

    std::unordered_map<std::int64_t, CpuSpan> launches;  // by correlation id
    std::map<std::int64_t, std::vector<CpuSpan>> nccl_spans;
    std::vector<std::string> collectives;  // per kernel, from its own args
    std::unordered_map<std::string, std::uint32_t> name_ids;
    std::vector<std::int64_t> correlation;
    std::size_t gpu_kernels = 0;
    bool whole_us = true;
    std::size_t index = 0;
    for (dom::element e : events) {
        const std::size_t i = index++;
        if (string_or(e, "ph") != "X") continue;
        const std::string_view cat = string_or(e, "cat");
        const std::string_view name = string_or(e, "name");
        if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
            TraceKernel k;
            const bool is_kernel = cat == "kernel";
            const auto [ts, dur] = time_of(e, path, i, name, is_kernel ? &whole_us : nullptr);
            k.start_s = ts;
            k.duration_s = dur;
            auto [it, fresh] = name_ids.try_emplace(std::string(name),
                                                    static_cast<std::uint32_t>(trace.names.size()));
            if (fresh) trace.names.emplace_back(name);
            k.name_id = it->second;
            dom::element args;
            std::int64_t corr = -1;
            std::string collective;
            if (e["args"].get(args) == simdjson::SUCCESS) {
                read_launch_shape(args, k);
                if (args["correlation"].get_int64().get(corr) != simdjson::SUCCESS) corr = -1;
                collective = std::string(string_or(args, "Collective name"));
            }
            k.cls = is_kernel ? detail::classify_kernel(name, collective)
                              : std::optional(detail::classify_memory_op(name));
            gpu_kernels += is_kernel ? 1 : 0;
            trace.kernels.push_back(k);
            correlation.push_back(corr);
            collectives.push_back(std::move(collective));
        } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
            dom::element args;
            std::int64_t corr = 0;
            if (e["args"].get(args) == simdjson::SUCCESS &&
                args["correlation"].get_int64().get(corr) == simdjson::SUCCESS) {
                const auto [ts, dur] = time_of(e, path, i, name, nullptr);
                launches[corr] = CpuSpan{thread_of(e), ts, ts + dur, {}};
            }
        } else if (name.rfind("ProfilerStep#", 0) == 0 && cat != "gpu_user_annotation") {
            const auto [ts, dur] = time_of(e, path, i, name, nullptr);
            if (!(dur > 0)) {
                // a step of no time has no median to scale by (issue 33: a segfault)
                throw ConfigError(fmt::format(
                    "{}: traceEvents[{}] ('{}'): a profiler step of 'dur' {}: not a positive "
                    "duration",
                    path, i, name, dur));
            }
            TraceStep s;
            std::from_chars(name.data() + 13, name.data() + name.size(), s.number);
            s.start_s = ts;
            s.duration_s = dur;
            trace.steps.push_back(s);
        } else if (name.rfind("nccl:", 0) == 0 && cat != "gpu_user_annotation") {
            const auto [ts, dur] = time_of(e, path, i, name, nullptr);
            nccl_spans[thread_of(e)].push_back(
                CpuSpan{thread_of(e), ts, ts + dur, std::string(name.substr(5))});
        }
    }
    if (gpu_kernels == 0) {
        throw ConfigError(
            fmt::format("{}: no GPU kernels (events with \"cat\": \"kernel\"); profile with "
                        "ProfilerActivity.CUDA",
                        path));
    }
    if (trace.steps.empty()) {
        throw ConfigError(fmt::format(
            "{}: no ProfilerStep#N annotations; record with a torch.profiler schedule and call "
            "prof.step() once per training step",
            path));
    }
    for (auto& [thread, v] : nccl_spans) {
        std::sort(v.begin(), v.end(),
                  [](const CpuSpan& a, const CpuSpan& b) { return a.start_us < b.start_us; });
    }
    std::sort(trace.steps.begin(), trace.steps.end(),
              [](const TraceStep& a, const TraceStep& b) { return a.start_s < b.start_s; });

    // Launch times, steps, collectives of NCCL kernels; microseconds to seconds.
    for (std::size_t k = 0; k < trace.kernels.size(); ++k) {
        TraceKernel& kernel = trace.kernels[k];
        kernel.launch_s = kernel.start_s;
        const auto launch = launches.find(correlation[k]);
        if (launch != launches.end()) {
            kernel.launch_s = launch->second.start_us;
            if (collectives[k].empty() && !nccl_spans.empty() &&
                trace.names[kernel.name_id].find("nccl") != std::string::npos) {
                const std::string collective = enclosing_collective(nccl_spans, launch->second);
                if (!collective.empty()) {
                    kernel.cls = detail::classify_kernel(trace.names[kernel.name_id], collective);
                }
            }
        }
        auto after = std::upper_bound(trace.steps.begin(), trace.steps.end(), kernel.launch_s,
                                      [](double t, const TraceStep& s) { return t < s.start_s; });
        if (after != trace.steps.begin()) {
            const TraceStep& s = *(after - 1);
            if (kernel.launch_s < s.start_s + s.duration_s) {
                kernel.step = static_cast<std::int32_t>(after - 1 - trace.steps.begin());
            }
        }
    }
    for (TraceKernel& kernel : trace.kernels) {
        kernel.launch_s *= kMicro;
        kernel.start_s *= kMicro;
        kernel.duration_s *= kMicro;
    }
    for (TraceStep& s : trace.steps) {
        s.start_s *= kMicro;
        s.duration_s *= kMicro;
    }
    std::sort(trace.kernels.begin(), trace.kernels.end(),
              [](const TraceKernel& a, const TraceKernel& b) { return a.start_s < b.start_s; });
    trace.resolution_s = whole_us ? 1e-6 : 1e-9;
    return trace;
}

std::vector<fit::TracedJob> traced_jobs(const std::vector<KinetoTrace>& traces) {
    // Job membership: world size and step numbers equal, ranks distinct.
    std::vector<std::vector<const KinetoTrace*>> members;
    for (const KinetoTrace& t : traces) {
        bool placed = false;
        for (auto& job : members) {
            const KinetoTrace& first = *job.front();
            const bool same_steps =
                first.steps.size() == t.steps.size() &&
                std::equal(
                    first.steps.begin(), first.steps.end(), t.steps.begin(),
                    [](const TraceStep& a, const TraceStep& b) { return a.number == b.number; });
            const bool rank_taken = std::any_of(
                job.begin(), job.end(), [&](const KinetoTrace* m) { return m->rank == t.rank; });
            if (first.world_size == t.world_size && t.world_size > 1 && same_steps && !rank_taken) {
                job.push_back(&t);
                placed = true;
                break;
            }
        }
        if (!placed) members.push_back({&t});
    }

    std::vector<fit::TracedJob> jobs;
    for (const auto& job : members) {
        fit::TracedJob out;
        out.ranks = static_cast<int>(job.size());
        out.steps = static_cast<int>(job.front()->steps.size());
        for (const TraceStep& s : job.front()->steps) out.step_time_s.push_back(s.duration_s);
        std::map<std::tuple<std::string, std::array<std::int32_t, 6>, int>, std::uint32_t> sites;
        for (std::size_t r = 0; r < job.size(); ++r) {
            const KinetoTrace& t = *job[r];
            out.name += (out.name.empty() ? "" : " + ") + t.path;
            out.resolution_s = std::max(out.resolution_s, t.resolution_s);
            // The kernel's order among equal kernels of its step, by launch order.
            std::vector<std::size_t> order(t.kernels.size());
            for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
            std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
                return t.kernels[a].launch_s < t.kernels[b].launch_s;
            });
            std::map<std::tuple<std::uint32_t, std::array<std::int32_t, 6>, std::int32_t>, int>
                seen;
            for (std::size_t i : order) {
                const TraceKernel& k = t.kernels[i];
                if (k.step < 0 || !k.cls) continue;
                const int occurrence = seen[{k.name_id, k.launch, k.step}]++;
                const auto key = std::make_tuple(t.names[k.name_id], k.launch, occurrence);
                const auto [it, fresh] =
                    sites.try_emplace(key, static_cast<std::uint32_t>(sites.size()));
                out.kernels.push_back(
                    fit::KernelInvocation{*k.cls, it->second, static_cast<std::uint32_t>(r),
                                          static_cast<std::uint32_t>(k.step), k.duration_s});
            }
        }
        jobs.push_back(std::move(out));
    }
    return jobs;
}

}  // namespace prism::io
