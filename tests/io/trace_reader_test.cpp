#include "io/trace_reader.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <fmt/format.h>

#include "io/detail/gzip_file.hpp"
#include "io/detail/kernel_class.hpp"
#include "src/common/error.hpp"
#include "tests/io/synthetic_trace.hpp"

namespace prism::io {
namespace {

using testing::SyntheticKernel;
using testing::SyntheticTrace;

std::string scratch(const std::string& name) {
    return testing::scratch_path("prism_trace_reader_test", name);
}

SyntheticTrace small_trace() {
    SyntheticTrace t;
    t.rank = 1;
    t.world_size = 4;
    t.steps = 3;
    t.kernels = {{"sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x32", 300, 0.01, 2, ""},
                 {"void at::native::vectorized_elementwise_kernel<4>", 40, 0.01, 1, ""},
                 {"ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)", 500, 0.05, 1,
                  "all_to_all"},
                 {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", 800, 0.05, 1, ""},
                 {"ncclKernel_Broadcast_RING_LL_Sum_float(ncclDevComm*)", 50, 0.05, 1, ""}};
    return t;
}

std::string message_of(const std::string& path) {
    try {
        read_kineto_trace(path);
    } catch (const ConfigError& e) {  // bad input: exit 2
        return e.what();
    }
    return "no error";
}

TEST(KernelClass, FollowsTheCollectiveThenTheName) {
    using detail::classify_kernel;

    EXPECT_EQ(classify_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "all_to_all"),
              KernelClass::alltoall);
    EXPECT_EQ(classify_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", ""), KernelClass::p2p);
    EXPECT_EQ(classify_kernel("ncclKernel_SendRecv", "_reduce_scatter_base"),
              KernelClass::reducescatter);
    EXPECT_EQ(classify_kernel("ncclDevKernel_AllGather_RING_LL", ""), KernelClass::allgather);
    EXPECT_FALSE(classify_kernel("ncclKernel_Broadcast_RING_LL_Sum_float", "").has_value());
    EXPECT_EQ(classify_kernel("void fbgemm_gpu::permute_2D_data_kernel<false>", ""),
              KernelClass::elementwise);
    EXPECT_EQ(classify_kernel("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64>", ""),
              KernelClass::gemm);
    EXPECT_EQ(classify_kernel("ampere_sgemm_128x64_nn", ""), KernelClass::gemm);
    EXPECT_EQ(classify_kernel("flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", ""),
              KernelClass::attention);
    EXPECT_EQ(
        classify_kernel("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor>", ""),
        KernelClass::optimizer);
    EXPECT_EQ(detail::classify_memory_op("Memcpy HtoD (Pinned -> Device)"),
              KernelClass::dataloader);
    EXPECT_EQ(detail::classify_memory_op("Memcpy DtoD (Device -> Device)"),
              KernelClass::elementwise);
}

TEST(KinetoTrace, ReadsStepsKernelsClassesAndTheRank) {
    const std::string path = scratch("small.json");
    testing::write_text(path, testing::synthetic_trace_json(small_trace()));

    const KinetoTrace t = read_kineto_trace(path);

    EXPECT_EQ(t.rank, 1);
    EXPECT_EQ(t.world_size, 4);
    EXPECT_EQ(t.device, "Synthetic GPU");
    EXPECT_DOUBLE_EQ(t.resolution_s, 1e-9);
    ASSERT_EQ(t.steps.size(), 3u);
    EXPECT_EQ(t.steps[0].number, 10);
    EXPECT_EQ(t.steps[2].number, 12);
    ASSERT_EQ(t.kernels.size(), 18u);  // 6 kernels x 3 steps
    int per_class[kKernelClassCount] = {};
    int unclassified = 0;
    for (const TraceKernel& k : t.kernels) {
        if (k.cls) {
            ++per_class[static_cast<int>(*k.cls)];
        } else {
            ++unclassified;
        }
        EXPECT_GE(k.step, 0);
        EXPECT_GT(k.duration_s, 0);
    }
    EXPECT_EQ(per_class[static_cast<int>(KernelClass::gemm)], 6);
    EXPECT_EQ(per_class[static_cast<int>(KernelClass::elementwise)], 3);
    EXPECT_EQ(per_class[static_cast<int>(KernelClass::alltoall)], 3);  // via the annotation
    EXPECT_EQ(per_class[static_cast<int>(KernelClass::allreduce)], 3);
    EXPECT_EQ(unclassified, 3);  // broadcast
    EXPECT_EQ(t.kernels.front().step, 0);
    EXPECT_EQ(t.kernels.back().step, 2);
}

TEST(KinetoTrace, ReadsGzipAndWholeMicrosecondsAlike) {
    SyntheticTrace spec = small_trace();
    spec.whole_microseconds = true;
    const std::string path = scratch("small.json.gz");
    testing::write_gzip(path, testing::synthetic_trace_json(spec));

    const KinetoTrace t = read_kineto_trace(path);

    EXPECT_EQ(t.kernels.size(), 18u);
    EXPECT_DOUBLE_EQ(t.resolution_s, 1e-6);
}

TEST(KinetoTrace, BadTracesNameTheFileAndTheProblem) {
    const std::string text = testing::synthetic_trace_json(small_trace());
    const std::string truncated = scratch("truncated.json");
    testing::write_text(truncated, text.substr(0, text.size() / 2));
    const std::string truncated_gz = scratch("truncated.json.gz");
    testing::write_gzip(scratch("whole.json.gz"), text);
    {
        std::ifstream in(scratch("whole.json.gz"), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        testing::write_text(truncated_gz, bytes.substr(0, bytes.size() / 2));
    }
    const std::string foreign = scratch("foreign.json");
    testing::write_text(foreign, R"({"schema": 3, "events": []})");
    const std::string array = scratch("array.json");
    testing::write_text(array, "[1, 2, 3]");
    const std::string no_kernels = scratch("no_kernels.json");
    testing::write_text(no_kernels, R"({"traceEvents": [{"ph": "X", "cat": "user_annotation",
        "name": "ProfilerStep#1", "ts": 1, "dur": 5}]})");
    const std::string no_steps = scratch("no_steps.json");
    testing::write_text(no_steps, R"({"traceEvents": [{"ph": "X", "cat": "kernel",
        "name": "gemm", "ts": 1, "dur": 5}]})");
    const std::string no_dur = scratch("no_dur.json");
    testing::write_text(no_dur, R"({"traceEvents": [{"ph": "X", "cat": "kernel",
        "name": "gemm", "ts": 1}]})");

    EXPECT_EQ(message_of(truncated).rfind(truncated + ": not valid JSON (", 0), 0u)
        << message_of(truncated);
    EXPECT_NE(message_of(truncated).find("a truncated or corrupt trace?"), std::string::npos);
    EXPECT_EQ(message_of(truncated_gz).rfind(truncated_gz + ": corrupt gzip stream: ", 0), 0u)
        << message_of(truncated_gz);
    EXPECT_EQ(message_of(foreign),
              foreign +
                  ": unknown schema: no \"traceEvents\" array (not a PyTorch profiler / "
                  "Kineto trace)");
    EXPECT_EQ(
        message_of(array).rfind(array + ": unknown schema: the document is not a JSON object", 0),
        0u);
    EXPECT_EQ(message_of(no_kernels),
              no_kernels +
                  ": no GPU kernels (events with \"cat\": \"kernel\"); profile with "
                  "ProfilerActivity.CUDA");
    EXPECT_EQ(message_of(no_steps).rfind(no_steps + ": no ProfilerStep#N annotations;", 0), 0u);
    EXPECT_EQ(message_of(no_dur),
              no_dur + ": traceEvents[0] ('gemm'): missing or non-numeric 'ts' or 'dur'");
    EXPECT_EQ(message_of(scratch("missing.json")), scratch("missing.json") + ": no such file");
}

// Issue 33, items 1 and 11: profiler steps of 'dur' 0 gave a zero median and a segfault in
// `steps compare`; negative durations gave garbage statistics.
TEST(KinetoTrace, RefusesStepsOfNoTimeAndNegativeDurations) {
    const std::string zero_step = scratch("zero_step.json");
    testing::write_text(zero_step, R"({"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 1, "dur": 0},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 5}]})");
    const std::string negative = scratch("negative.json");
    testing::write_text(negative, R"({"traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 1, "dur": 50},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": -5}]})");

    EXPECT_EQ(message_of(zero_step),
              zero_step +
                  ": traceEvents[0] ('ProfilerStep#1'): a profiler step of 'dur' 0: not a "
                  "positive duration");
    EXPECT_EQ(message_of(negative),
              negative +
                  ": traceEvents[1] ('gemm'): 'ts' 1 and 'dur' -5: not a finite time and a "
                  "duration >= 0");
}

// Issue 33, item 7: a 22 MB .json.gz took 9.8 GB before failing. The reader stops at the limit
// (kMaxTraceBytes, 1 GiB of JSON; here a small limit on the same reader), and refuses a
// directory.
TEST(KinetoTrace, StopsDecompressingAtTheLimit) {
    const std::string bomb = scratch("bomb.json.gz");
    testing::write_gzip(bomb, std::string(3u << 20, ' '));  // 3 MiB of blanks, ~3 KB on disk

    EXPECT_EQ(std::filesystem::file_size(bomb) < 100000, true);
    try {
        detail::read_maybe_gzip(bomb, 1u << 20);
        ADD_FAILURE() << "no error";
    } catch (const ConfigError& e) {
        EXPECT_EQ(std::string(e.what()),
                  bomb +
                      ": larger than 1048576 bytes (decompressed), the limit for a trace; "
                      "profile fewer steps (torch.profiler schedule active=N)");
    }
    EXPECT_EQ(detail::read_maybe_gzip(bomb, 4u << 20).size(), 3u << 20);
    const std::string dir = std::filesystem::path(bomb).parent_path().string();
    EXPECT_EQ(message_of(dir), dir + ": is a directory, not a trace");
}

TEST(TracedJobs, GroupsRanksOfOneRunAndNumbersSitesAcrossSteps) {
    SyntheticTrace a = small_trace();
    SyntheticTrace b = small_trace();
    b.rank = 2;
    SyntheticTrace other = small_trace();
    other.world_size = 8;
    testing::write_text(scratch("a.json"), testing::synthetic_trace_json(a));
    testing::write_text(scratch("b.json"), testing::synthetic_trace_json(b));
    testing::write_text(scratch("other.json"), testing::synthetic_trace_json(other));
    const std::vector<KinetoTrace> traces{read_kineto_trace(scratch("a.json")),
                                          read_kineto_trace(scratch("b.json")),
                                          read_kineto_trace(scratch("other.json"))};

    const std::vector<fit::TracedJob> jobs = traced_jobs(traces);

    ASSERT_EQ(jobs.size(), 2u);
    EXPECT_EQ(jobs[0].ranks, 2);
    EXPECT_EQ(jobs[0].steps, 3);
    EXPECT_EQ(jobs[1].ranks, 1);
    // 5 classified sites per step and rank (2 gemm shapes, elementwise, all-to-all, allreduce),
    // the same ids on every step and rank.
    std::set<std::uint32_t> sites;
    for (const fit::KernelInvocation& k : jobs[0].kernels) sites.insert(k.site);
    EXPECT_EQ(sites.size(), 5u);
    EXPECT_EQ(jobs[0].kernels.size(), 30u);
}

// Issue 33, item 12: step and rank indices were stored in 16 bits, so past 65,535 profiler steps
// a kernel landed in step (index mod 65,536).
TEST(TracedJobs, KeepsStepIndicesPast65535) {
    constexpr int kSteps = 65540;
    std::string json = R"({"traceEvents": [)";
    for (int k = 0; k < kSteps; ++k) {
        json += fmt::format(
            R"({{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{}", "ts": {}, )"
            R"("dur": 10}},)",
            k, 10 * k);
    }
    // one kernel in the last step, one in the first
    json += fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "gemm", "ts": {}, "dur": 5}},)",
                        10 * (kSteps - 1) + 1);
    json += R"({"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 5}]})";
    testing::write_text(scratch("long.json"), json);

    const std::vector<fit::TracedJob> jobs = traced_jobs({read_kineto_trace(scratch("long.json"))});

    ASSERT_EQ(jobs.size(), 1u);
    std::set<std::uint32_t> steps;
    for (const fit::KernelInvocation& k : jobs[0].kernels) steps.insert(k.step);
    EXPECT_EQ(steps, (std::set<std::uint32_t>{0, kSteps - 1}));
}

// Issue 33, item 16: a rank outside the world size (or -1) was taken as given.
TEST(KinetoTrace, RefusesARankOutsideTheWorldSize) {
    const std::string outside = scratch("outside.json");
    testing::write_text(outside, R"({"distributedInfo": {"rank": 4, "world_size": 4},
        "traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 5}]})");
    const std::string negative = scratch("negative_rank.json");
    testing::write_text(negative, R"({"distributedInfo": {"rank": -1, "world_size": 4},
        "traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 5}]})");

    EXPECT_EQ(
        message_of(outside),
        outside + ": distributedInfo: rank 4 is not a rank of a job of world_size 4 (0 to 3)");
    EXPECT_EQ(
        message_of(negative),
        negative + ": distributedInfo: rank -1 is not a rank of a job of world_size 4 (0 to 3)");
}

TEST(KinetoTrace, ReadsTheSharedTracesStepsAsTheirReadmeLists) {
    // tests/data/traces/README.md (from the HolisticTraceAnalysis traces' own annotations)
    const KinetoTrace t = read_kineto_trace(std::string(PRISM_TEST_DATA_DIR) +
                                            "/traces/a100_16rank_pp_rank0.json.gz");
    const double expected_ms[] = {209.748, 216.483, 216.119, 215.467, 216.216};

    ASSERT_EQ(t.steps.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i)
        EXPECT_NEAR(t.steps[i].duration_s * 1e3, expected_ms[i], 1e-9);
    EXPECT_EQ(t.rank, 0);
    EXPECT_EQ(t.world_size, 16);
    EXPECT_EQ(t.device, "NVIDIA A100-SXM4-80GB");
    std::size_t kernels = 0;
    for (const TraceKernel& k : t.kernels)
        kernels += t.names[k.name_id].find("Memcpy") == 0 || t.names[k.name_id].find("Memset") == 0
                       ? 0
                       : 1;
    EXPECT_EQ(kernels, 6080u);
}

}  // namespace
}  // namespace prism::io
