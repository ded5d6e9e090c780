#include "io/experiment_loader.hpp"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "io/resolved_settings.hpp"
#include "src/common/error.hpp"
#include "src/model/memory.hpp"
#include "tests/io/loader_test_helpers.hpp"

namespace {

using prism::io::load_experiment;
using prism::io::parse_experiment;

const std::string& kBase = prism::test::kBaseExperiment;

std::string error_of(const std::string& text) { return prism::test::loader_error_of(text); }

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

TEST(ExperimentLoader, MalformedTomlReportsParserLocation) {
    // "[space" ends at column 6; the parser stops at the newline in column 7.
    EXPECT_EQ(error_of(kBase + "[space\n"),
              "exp.toml:7:7: invalid TOML: error while parsing table header: expected ']', saw "
              "'\\n'");
    EXPECT_EQ(error_of("a = 1\nb = = 2\n"),
              "exp.toml:2:5: invalid TOML: error while parsing value: could not determine value "
              "type");
}

TEST(ExperimentLoader, Fp8ParamsNeedFp8Precision) {
    const std::string head = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n";
    const std::string tail = "[hardware.h100]\npreset = \"h100-sxm\"\n";

    EXPECT_EQ(error_of(head + "fp8_params = true\n" + tail),
              "exp.toml:5:14: training.fp8_params: FP8 parameters need precision = \"fp8\"");
    const prism::Experiment e = prism::io::parse_experiment(
        head + "precision = \"fp8\"\nfp8_params = true\n" + tail, "exp.toml");
    EXPECT_TRUE(e.training.fp8_params);
    EXPECT_FALSE(prism::io::parse_experiment(head + tail, "exp.toml").training.fp8_params);
}

// pure_bf16 turns the gradients bf16 (grad_reduce_in_fp32 off); it refuses FP8 training and an
// explicit fp32 gradient buffer, naming the line and key.
TEST(ExperimentLoader, PureBf16ImpliesBf16GradientsAndRefusesFp8OrFp32Gradients) {
    const std::string head = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n";
    const std::string tail = "[hardware.h100]\npreset = \"h100-sxm\"\n";

    const prism::Experiment e =
        prism::io::parse_experiment(head + "pure_bf16 = true\n" + tail, "exp.toml");
    EXPECT_TRUE(e.training.pure_bf16);
    EXPECT_FALSE(e.training.grad_reduce_in_fp32);
    EXPECT_FALSE(prism::io::parse_experiment(head + tail, "exp.toml").training.pure_bf16);
    EXPECT_EQ(error_of(head + "precision = \"fp8\"\npure_bf16 = true\n" + tail),
              "exp.toml:6:13: training.pure_bf16: pure bf16 training needs precision = \"bf16\"");
    EXPECT_EQ(error_of(head + "grad_reduce_in_fp32 = true\npure_bf16 = true\n" + tail),
              "exp.toml:5:23: training.grad_reduce_in_fp32: pure_bf16 keeps no fp32 gradients; "
              "leave it out or set it false");
}

TEST(ExperimentLoader, UnknownKeySuggestsNearestValidKey) {
    EXPECT_EQ(error_of(kBase + "[space]\ntpp = [1, 2]\n"),
              "exp.toml:8:1: unknown key 'tpp' in [space]; did you mean 'tp'?");
}

TEST(ExperimentLoader, UnknownKeyFarFromEveryKeyHasNoSuggestion) {
    EXPECT_EQ(error_of(kBase + "[space]\nbanana = [1]\n"),
              "exp.toml:8:1: unknown key 'banana' in [space]");
}

TEST(ExperimentLoader, UnknownTopLevelTableSuggestsNearest) {
    EXPECT_EQ(error_of(kBase + "[evalution]\nsamples = 3\n"),
              "exp.toml:7:2: unknown key 'evalution' at top level; did you mean 'evaluation'?");
}

TEST(ExperimentLoader, UnknownKeyInsideInlineDistributionIsReported) {
    EXPECT_EQ(error_of(kBase + "[variability]\ngemm = { dist = \"lognormal\", cvv = 0.05 }\n"),
              "exp.toml:8:30: unknown key 'cvv' in [variability.gemm]; did you mean 'cv'?");
}

TEST(ExperimentLoader, UnknownKeyInPresetTableIsReported) {
    EXPECT_EQ(error_of(kBase + "nic_bandwith = \"200 Gb/s\"\n"),
              "exp.toml:7:1: unknown key 'nic_bandwith' in [hardware.h100]; did you mean "
              "'nic_bandwidth'?");
}

TEST(ExperimentLoader, WrongTypeInSpaceListNamesBothTypes) {
    EXPECT_EQ(error_of(kBase + "[space]\ntp = [\"8\"]\n"),
              "exp.toml:8:7: space.tp: expected an integer, got a string");
}

TEST(ExperimentLoader, WrongTypeOfScalarNamesBothTypes) {
    EXPECT_EQ(error_of(kBase + "[evaluation]\nsamples = \"many\"\n"),
              "exp.toml:8:11: evaluation.samples: expected an integer, got a string");
}

TEST(ExperimentLoader, WrongUnitDimensionIsReported) {
    EXPECT_EQ(error_of(kBase + "nic_bandwidth = \"80 GB\"\n"),
              "exp.toml:7:17: hardware.h100.nic_bandwidth: expected a bandwidth (e.g. "
              "\"400 Gb/s\"), got \"80 GB\"");
}

TEST(ExperimentLoader, UnknownUnitIsNamed) {
    EXPECT_EQ(error_of(kBase + "nic_bandwidth = \"400 Gbps\"\n"),
              "exp.toml:7:17: hardware.h100.nic_bandwidth: unknown unit 'Gbps' in \"400 Gbps\"; "
              "expected a bandwidth (e.g. \"400 Gb/s\")");
}

TEST(ExperimentLoader, BareNumberWithoutUnitIsRejectedWhereNotStated) {
    EXPECT_EQ(error_of(kBase + "nic_latency = 5\n"),
              "exp.toml:7:15: hardware.h100.nic_latency: expected a time with a unit (e.g. "
              "\"30 min\"), got the bare number 5; bare numbers are not accepted here");
}

TEST(ExperimentLoader, QuantityOfWrongTypeNamesTheQuantity) {
    EXPECT_EQ(error_of(kBase + "hbm_capacity = true\n"),
              "exp.toml:7:16: hardware.h100.hbm_capacity: expected a size in bytes (e.g. "
              "\"80 GB\"), got a boolean");
    EXPECT_EQ(error_of(kBase + "hbm_efficiency = \"0.8\"\n"),
              "exp.toml:7:18: hardware.h100.hbm_efficiency: expected a number, got a string");
}

TEST(ExperimentLoader, EmptySpaceListNamesTheKey) {
    EXPECT_EQ(error_of(kBase + "[space]\ntp = []\n"),
              "exp.toml:8:6: space.tp: empty list; give at least one value");
}

TEST(ExperimentLoader, UnknownModelPresetListsKnownNames) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama-3-8b\"\n"),
              "exp.toml:2:10: model.preset: unknown model preset 'llama-3-8b' (known: "
              "deepseek-v3, gpt3-175b, llama3-405b, llama3-70b, llama3-8b, megatron-1t, "
              "mixtral-8x22b, mixtral-8x7b, qwen3-235b-a22b, qwen3-30b-a3b); did you mean "
              "'llama3-8b'?");
}

TEST(ExperimentLoader, UnknownGpuPresetListsKnownNames) {
    EXPECT_EQ(error_of(kBase + "[hardware.x]\npreset = \"h300\"\n"),
              "exp.toml:8:10: hardware.x.preset: unknown gpu preset 'h300' (known: a100-40gb, "
              "a100-80gb, b200, b300, gb200-nvl72, gb300-nvl72, h100-sxm, h200); did you mean "
              "'b300'?");
}

TEST(ExperimentLoader, UnknownStackNameIsLocatedAndListsKnownStacks) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n"
                       "stack = \"nemo-mlpef\"\n[hardware.h100]\npreset = \"h100-sxm\"\n"),
              "exp.toml:5:9: training.stack: unknown stack preset 'nemo-mlpef' (known: "
              "deepspeed, llm-foundry, megatron-core, nemo-mlperf, torchtitan); did you mean "
              "'nemo-mlperf'?");
    EXPECT_EQ(error_of(kBase + "[stack]\npreset = \"titan\"\n"),
              "exp.toml:8:10: stack.preset: unknown stack preset 'titan' (known: deepspeed, "
              "llm-foundry, megatron-core, nemo-mlperf, torchtitan)");
}

TEST(ExperimentLoader, StackGivenTwiceOrWithBadValuesIsRejectedAtTheKey) {
    const std::string head =
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\nstack = "
        "\"deepspeed\"\n[hardware.h100]\npreset = \"h100-sxm\"\n";
    EXPECT_EQ(error_of(head + "[stack]\ngemm_efficiency = 0.5\n"),
              "exp.toml:5:9: training.stack: give the stack either here or in [stack] (preset = "
              "...), not both");
    EXPECT_EQ(error_of(kBase + "[stack]\ngemm_efficiency = 1.5\n"),
              "exp.toml:8:19: stack.gemm_efficiency: value 1.5 must be <= 1 (a fraction of the "
              "hardware's kernel ceiling)");
    EXPECT_EQ(error_of(kBase + "[stack]\nattention_kernel = \"fa4\"\n"),
              "exp.toml:8:20: stack.attention_kernel: unknown value 'fa4'; expected one of "
              "\"cudnn\", \"fa2\", \"fa3\"");
}

// Each efficiency is the GPU preset's kernel ceiling times the stack's factor, by hand from the
// numbers written in the two files (h100-sxm: BF16 GEMM 0.80 of which training sustains 0.855,
// FP8 0.70, cuDNN attention's MMAs 0.6514, FA2's 0.3885, 3.9e12 exponentials/s, HBM 0.9,
// collectives 0.8, no host time; the [stack] values below). The attention factor slows the
// kernel's exponentials too.
TEST(ExperimentLoader, StackFactorsMultiplyTheHardwareCeilings) {
    const prism::Experiment e = parse_experiment(
        kBase +
            "[stack]\npreset = \"llm-foundry\"\nattention_kernel = \"fa2\"\n"
            "gemm_efficiency = 0.75\nfp8_gemm_efficiency = 0.5\nattention_efficiency = 0.4\n"
            "hbm_efficiency = 0.6\ncollective_efficiency = 0.25\nkernel_launch = \"30 us\"\n",
        "exp.toml");
    const prism::HardwareSpec& hw = e.hardware.at(0);
    EXPECT_DOUBLE_EQ(hw.gpu.gemm.max_efficiency, 0.80 * 0.75 * 0.855);
    EXPECT_DOUBLE_EQ(hw.gpu.fp8_gemm_max_efficiency, 0.70 * 0.5);
    EXPECT_DOUBLE_EQ(hw.gpu.attention_efficiency, 0.3885 * 0.4);
    EXPECT_DOUBLE_EQ(hw.gpu.exp_per_s, 3.9e12 * 0.4);
    EXPECT_DOUBLE_EQ(hw.gpu.attention_exp_overlap, 0.0);
    EXPECT_DOUBLE_EQ(hw.gpu.hbm_efficiency, 0.9 * 0.6);
    EXPECT_DOUBLE_EQ(hw.collective_efficiency, 0.8 * 0.25);
    EXPECT_DOUBLE_EQ(hw.kernel_launch_s, 30e-6);
    EXPECT_NE(hw.gpu.source.find("stack llm-foundry"), std::string::npos) << hw.gpu.source;
}

// fp8_cast: torchtitan's preset casts separately (torchao), llm-foundry's in te.Linear's
// cast-transpose, megatron-core's fuses (TE's fused modules, the default); a [stack] table may
// override it; another word is rejected at the key.
TEST(ExperimentLoader, StackFp8CastSeparateTeLinearOrFused) {
    auto cast_of = [](const std::string& stack) {
        return parse_experiment(kBase + stack, "exp.toml").hardware.at(0).fp8_cast;
    };
    EXPECT_EQ(cast_of(""), prism::Fp8Cast::fused);
    EXPECT_EQ(cast_of("[stack]\npreset = \"torchtitan\"\n"), prism::Fp8Cast::separate);
    EXPECT_EQ(cast_of("[stack]\npreset = \"llm-foundry\"\n"), prism::Fp8Cast::te_linear);
    EXPECT_EQ(cast_of("[stack]\npreset = \"torchtitan\"\nfp8_cast = \"fused\"\n"),
              prism::Fp8Cast::fused);
    EXPECT_EQ(cast_of("[stack]\nfp8_cast = \"te-linear\"\n"), prism::Fp8Cast::te_linear);
    EXPECT_EQ(error_of(kBase + "[stack]\nfp8_cast = \"unfused\"\n"),
              "exp.toml:8:12: stack.fp8_cast: unknown value 'unfused'; expected one of "
              "\"fused\", \"separate\", \"te-linear\"");
}

// The stack's GEMM workspaces replace the default reserve's (TransformerEngine's 96 MiB: PyTorch's
// 32 MiB cuBLAS workspace on Hopper + 2 x 32 MiB cuBLASLt): torchtitan holds PyTorch's alone
// (32 MiB), so its reserve is 64 MiB less; [memory] workspace still overrides the stack.
TEST(ExperimentLoader, StackWorkspaceReplacesTheDefaultReserveUnlessMemoryNamesIt) {
    constexpr double kMiB = 1024.0 * 1024.0;
    const prism::Experiment core = parse_experiment(kBase, "exp.toml");
    const prism::Experiment titan =
        parse_experiment(kBase + "[stack]\npreset = \"torchtitan\"\n", "exp.toml");
    EXPECT_DOUBLE_EQ(core.memory_reserve.workspace_bytes, 96 * kMiB);
    EXPECT_DOUBLE_EQ(titan.memory_reserve.workspace_bytes, 32 * kMiB);
    EXPECT_DOUBLE_EQ(titan.memory_reserve.cuda_context_bytes,
                     core.memory_reserve.cuda_context_bytes);
    const prism::DesignPoint p;
    EXPECT_DOUBLE_EQ(prism::reserved_bytes(core.memory_reserve, p) -
                         prism::reserved_bytes(titan.memory_reserve, p),
                     64 * kMiB);
    const prism::Experiment given = parse_experiment(
        kBase + "[stack]\npreset = \"torchtitan\"\n[memory]\nworkspace = \"8 MiB\"\n", "exp.toml");
    EXPECT_DOUBLE_EQ(given.memory_reserve.workspace_bytes, 8 * kMiB);
}

// The MoE keys (docs/moe_calibration.md): the GPU preset's a2a ceilings per link level
// (h100-sxm: DeepEP's 0.77 NVLink, 1.0 NIC) times the stack's factors; the grouped-GEMM and
// permute factors are the stack's alone; a factor above 1 is rejected at its key.
TEST(ExperimentLoader, MoeStackFactorsMultiplyTheA2aCeilings) {
    const prism::Experiment e =
        parse_experiment(kBase +
                             "[stack]\npreset = \"megatron-core\"\na2a_nvlink_efficiency = 0.5\n"
                             "a2a_nic_efficiency = 0.25\ngrouped_gemm_efficiency = 0.8\n"
                             "permute_efficiency = 0.1\n",
                         "exp.toml");
    const prism::HardwareSpec& hw = e.hardware.at(0);
    EXPECT_DOUBLE_EQ(hw.a2a_nvlink_efficiency, 0.77 * 0.5);
    EXPECT_DOUBLE_EQ(hw.a2a_nic_efficiency, 1.0 * 0.25);
    EXPECT_DOUBLE_EQ(hw.grouped_gemm_factor, 0.8);
    EXPECT_DOUBLE_EQ(hw.permute_factor, 0.1);
    // the wave is the stack's: a stack without the key groups all local experts (0)
    const prism::Experiment other =
        parse_experiment(kBase + "[stack]\npreset = \"llm-foundry\"\n", "exp.toml");
    EXPECT_DOUBLE_EQ(other.hardware.at(0).grouped_gemm_wave_experts, 0);
    const prism::Experiment wave = parse_experiment(
        kBase + "[stack]\npreset = \"megatron-core\"\ngrouped_gemm_wave_experts = 4.5\n",
        "exp.toml");
    EXPECT_DOUBLE_EQ(wave.hardware.at(0).grouped_gemm_wave_experts, 4.5);
    EXPECT_EQ(error_of(kBase + "[stack]\ngrouped_gemm_wave_experts = 0.5\n"),
              "exp.toml:8:29: stack.grouped_gemm_wave_experts: value 0.5 must be >= 1 (experts "
              "whose GEMMs fill the GPU together)");
    EXPECT_EQ(error_of(kBase + "[stack]\npermute_efficiency = 2\n"),
              "exp.toml:8:22: stack.permute_efficiency: value 2 must be <= 1 (a fraction of the "
              "hardware's kernel ceiling)");
    EXPECT_EQ(error_of(kBase + "a2a_nic_efficiency = 1.2\n"),
              "exp.toml:7:22: hardware.h100.a2a_nic_efficiency: value 1.2 must be <= 1");
}

// collective_nic_efficiency, across NVLink domains: the hardware's ceiling there (its collective
// one, 0.8 on h100-sxm, when not given) times the stack's factor there (its collective factor
// when not given: every shipped preset); the collective efficiency inside the domain is unmoved.
TEST(ExperimentLoader, CollectiveNicEfficiencyIsItsOwnCeilingTimesItsOwnFactor) {
    const prism::Experiment plain = parse_experiment(kBase, "exp.toml");
    const prism::HardwareSpec& p = plain.hardware.at(0);
    EXPECT_DOUBLE_EQ(p.collective_nic_efficiency, p.collective_efficiency);
    EXPECT_LT(p.collective_efficiency, 0.8);
    const prism::Experiment given = parse_experiment(
        kBase +
            "collective_nic_efficiency = 0.9\n[stack]\ncollective_efficiency = 0.25\n"
            "collective_nic_efficiency = 0.5\n",
        "exp.toml");
    const prism::HardwareSpec& g = given.hardware.at(0);
    EXPECT_DOUBLE_EQ(g.collective_nic_efficiency, 0.9 * 0.5);
    EXPECT_DOUBLE_EQ(g.collective_efficiency, 0.8 * 0.25);
    const prism::Experiment ceiling_only =
        parse_experiment(kBase +
                             "collective_nic_efficiency = 0.9\n[stack]\n"
                             "collective_efficiency = 0.25\n",
                         "exp.toml");
    EXPECT_DOUBLE_EQ(ceiling_only.hardware.at(0).collective_nic_efficiency, 0.9 * 0.25);
    EXPECT_EQ(error_of(kBase + "[stack]\ncollective_nic_efficiency = 1.5\n"),
              "exp.toml:8:29: stack.collective_nic_efficiency: value 1.5 must be <= 1 (a fraction "
              "of the hardware's kernel ceiling)");
    EXPECT_EQ(error_of(kBase + "collective_nic_efficiency = 1.2\n"),
              "exp.toml:7:29: hardware.h100.collective_nic_efficiency: value 1.2 must be <= 1");
}

// overlap_compute_cost is the stack's: 0 in every shipped preset, a fraction below 1 when given.
TEST(ExperimentLoader, OverlapComputeCostIsTheStacksFractionBelowOne) {
    const prism::Experiment plain = parse_experiment(kBase, "exp.toml");
    EXPECT_DOUBLE_EQ(plain.hardware.at(0).overlap_compute_cost, 0);
    const prism::Experiment given = parse_experiment(
        kBase + "[stack]\npreset = \"torchtitan\"\noverlap_compute_cost = 0.25\n", "exp.toml");
    EXPECT_DOUBLE_EQ(given.hardware.at(0).overlap_compute_cost, 0.25);
    EXPECT_EQ(error_of(kBase + "[stack]\noverlap_compute_cost = 1\n"),
              "exp.toml:8:24: stack.overlap_compute_cost: value 1 must be < 1 (the fraction of an "
              "overlapped collective's time its compute loses)");
    EXPECT_EQ(error_of(kBase + "[stack]\noverlap_compute_cost = -0.1\n"),
              "exp.toml:8:24: stack.overlap_compute_cost: value -0.1 must be >= 0");
}

// The stack's default overlaps apply where [training] does not name them: deepspeed's preset
// turns the overlapped gradient reduction off, megatron-core's (the default) leaves it on.
TEST(ExperimentLoader, StackDefaultOverlapsApplyUnlessTrainingNamesThem) {
    const std::string head = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n";
    const std::string tail = "[hardware.h100]\npreset = \"h100-sxm\"\n";
    EXPECT_TRUE(parse_experiment(head + tail, "exp.toml").training.overlap_grad_reduce);
    EXPECT_FALSE(parse_experiment(head + "stack = \"deepspeed\"\n" + tail, "exp.toml")
                     .training.overlap_grad_reduce);
    EXPECT_TRUE(parse_experiment(
                    head + "stack = \"deepspeed\"\noverlap_grad_reduce = true\n" + tail, "exp.toml")
                    .training.overlap_grad_reduce);
    EXPECT_TRUE(parse_experiment(head + "stack = \"nemo-mlperf\"\n" + tail, "exp.toml")
                    .training.tp_comm_overlap);
}

TEST(ExperimentLoader, DpAndGpusTogetherAreRejected) {
    EXPECT_EQ(error_of(kBase + "[space]\ndp = [1, 2]\ngpus = [8]\n"),
              "exp.toml:9:1: space.gpus: dp and gpus are mutually exclusive (gpus sets dp = gpus "
              "/ (tp*pp*cp))");
}

TEST(ExperimentLoader, DimensionRangeErrorIsLocatedAtTheValue) {
    EXPECT_EQ(error_of(kBase + "[space]\ntp = [8, 0]\n"),
              "exp.toml:8:10: space.tp: value 0 must be >= 1");
}

TEST(ExperimentLoader, AnalyticGridPointsAreReadAndBounded) {
    // 257 unless set; 33 .. 4097 (the grid's interpolation needs a few points per sd, and the
    // per-point cost grows with it)
    EXPECT_EQ(parse_experiment(kBase, "exp.toml").evaluation.grid_points, 257);
    EXPECT_EQ(parse_experiment(kBase + "[evaluation]\ngrid_points = 129\n", "exp.toml")
                  .evaluation.grid_points,
              129);
    EXPECT_EQ(error_of(kBase + "[evaluation]\ngrid_points = 16\n"),
              "exp.toml:8:15: evaluation.grid_points: value 16 must be >= 33");
    EXPECT_EQ(error_of(kBase + "[evaluation]\ngrid_points = 5000\n"),
              "exp.toml:8:15: evaluation.grid_points: value 5000 must be <= 4097");
}

TEST(ExperimentLoader, PruneAndVerifyAreReadAndVerifyNeedsAnAnalyticSweepWithObjectives) {
    const auto base = parse_experiment(kBase, "exp.toml").evaluation;
    EXPECT_TRUE(base.prune);
    EXPECT_FALSE(base.verify_montecarlo);
    const std::string objectives = "[objectives]\nminimize = [\"step_time_p95_s\"]\n";
    const auto set =
        parse_experiment(
            kBase + "[evaluation]\nverify = \"montecarlo\"\nprune = false\n" + objectives,
            "exp.toml")
            .evaluation;
    EXPECT_TRUE(set.verify_montecarlo);
    EXPECT_FALSE(set.prune);
    EXPECT_FALSE(parse_experiment(kBase + "[evaluation]\nverify = \"none\"\n", "exp.toml")
                     .evaluation.verify_montecarlo);

    EXPECT_EQ(error_of(kBase + "[evaluation]\nverify = \"mc\"\n" + objectives),
              "exp.toml:8:10: evaluation.verify: unknown value 'mc'; expected one of \"none\", "
              "\"montecarlo\"");
    EXPECT_EQ(error_of(kBase + "[evaluation]\nverify = \"montecarlo\"\n"),
              "exp.toml:8:10: evaluation.verify: \"montecarlo\" verifies the Pareto front; it "
              "needs [objectives]");
    EXPECT_EQ(
        error_of(kBase + "[evaluation]\nverify = \"montecarlo\"\nmethod = \"montecarlo\"\n" +
                 objectives),
        "exp.toml:8:10: evaluation.verify: \"montecarlo\" re-evaluates an analytic sweep's front; "
        "the method is already montecarlo");
}

TEST(ExperimentLoader, HardwareDimensionMustNameATable) {
    EXPECT_EQ(error_of(kBase + "[space]\nhardware = [\"h100\", \"b200\"]\n"),
              "exp.toml:8:21: space.hardware: \"b200\" is not a [hardware.<name>] table (have: "
              "h100)");
}

TEST(ExperimentLoader, DefaultsErrorsNameTheDefaultsSection) {
    EXPECT_EQ(error_of(kBase + "[defaults]\nzero_stage = 4\n"),
              "exp.toml:8:14: defaults.zero_stage: value 4 must be 0, 1, 2 or 3");
}

TEST(ExperimentLoader, DuplicateSpaceValueIsRejected) {
    EXPECT_EQ(error_of(kBase + "[space]\ntp = [2, 4, 2]\n"),
              "exp.toml:8:13: space.tp: duplicate value 2");
}

TEST(ExperimentLoader, BaselineGpusMustBeAMultipleOfTheReplica) {
    EXPECT_EQ(error_of("[experiment]\nbaseline = { tp = 8, pp = 3, gpus = 64 }\n" + kBase),
              "exp.toml:2:37: experiment.baseline.gpus: 64 is not a multiple of tp*pp*cp = 24");
}

TEST(ExperimentLoader, UnknownObjectiveMetricSuggestsNearest) {
    EXPECT_EQ(error_of(kBase + "[objectives]\nminimize = [\"step_time_z\"]\n"),
              "exp.toml:8:13: objectives.minimize: unknown metric 'step_time_z'; did you mean "
              "'step_time_s'?");
}

TEST(ExperimentLoader, GlobalBatchInSequencesAndTokensIsRejected) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n"
                       "global_batch_tokens = 4194304\n[hardware.h]\npreset = \"h100-sxm\"\n"),
              "exp.toml:5:23: training.global_batch_tokens: give either global_batch "
              "(sequences) or global_batch_tokens, not both");
}

TEST(ExperimentLoader, GlobalBatchTokensMustDivideBySeq) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch_tokens = 1000\n"
                       "[hardware.h]\npreset = \"h100-sxm\"\n"),
              "exp.toml:4:23: training.global_batch_tokens: 1000 is not a multiple of seq = 8192");
}

TEST(ExperimentLoader, MixtureWeightsMustSumToOne) {
    EXPECT_EQ(error_of(kBase + "[variability]\nallreduce = { dist = \"mixture\", components = [\n"
                               "  { weight = 0.98, dist = \"constant\" },\n"
                               "  { weight = 0.01, dist = \"constant\", mean = 3.0 } ] }\n"),
              "exp.toml:8:46: variability.allreduce.components: weights sum to 0.99, expected 1 "
              "(within 1e-9)");
}

TEST(ExperimentLoader, NegativeCvIsRejected) {
    EXPECT_EQ(error_of(kBase + "[variability]\ngemm = { dist = \"normal\", cv = -0.1 }\n"),
              "exp.toml:8:32: variability.gemm.cv: value -0.1 must be >= 0");
}

TEST(ExperimentLoader, UnknownKeyInArrayOfTablesIsReported) {
    EXPECT_EQ(error_of(kBase + "[[failures.cause]]\nmtbf = \"1000 h\"\nscop = \"gpu\"\n"),
              "exp.toml:9:1: unknown key 'scop' in [failures.cause[0]]; did you mean 'scope'?");
}

TEST(ExperimentLoader, SectionThatIsNotATableIsReported) {
    EXPECT_EQ(error_of("evaluation = 3\n" + kBase),
              "exp.toml:1:14: evaluation: expected a table, got an integer");
}

TEST(ExperimentLoader, DistributionWithoutDistIsReported) {
    EXPECT_EQ(error_of(kBase + "[variability]\ngemm = { cv = 0.1 }\n"),
              "exp.toml:8:8: variability.gemm: missing 'dist' (one of \"constant\", \"normal\", "
              "\"lognormal\", \"gamma\", \"empirical\", \"mixture\")");
}

TEST(ExperimentLoader, GammaWithCvAndShapeIsRejected) {
    EXPECT_EQ(error_of(kBase + "[variability]\ngemm = { dist = \"gamma\", cv = 0.1, shape = 4 }\n"),
              "exp.toml:8:44: variability.gemm: give either cv or shape, not both");
}

TEST(ExperimentLoader, Fp8OnHardwareWithoutFp8IsRejected) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
                       "precision = \"fp8\"\n[hardware.a100]\npreset = \"a100-80gb\"\n"),
              "exp.toml:5:13: training.precision: \"fp8\" needs peak_fp8, which [hardware.a100] "
              "does not have");
}

TEST(ExperimentLoader, CustomModelMissingFieldIsReported) {
    EXPECT_EQ(error_of("[model]\nlayers = 2\nhidden = 64\nheads = 4\nseq = 16\n"),
              "exp.toml:1:1: model: missing 'vocab' (give it or a preset)");
}

TEST(ExperimentLoader, HeadsMustDivideHidden) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\nheads = 48\n"),
              "exp.toml:3:9: model.heads: 48 does not divide hidden = 4096");
}

TEST(ExperimentLoader, FixedCheckpointPolicyNeedsAnInterval) {
    EXPECT_EQ(error_of(kBase + "[failures]\ncheckpoint_policy = \"fixed\"\n"),
              "exp.toml:8:21: failures.checkpoint_policy: \"fixed\" needs checkpoint_interval "
              "(here or in [space] / [defaults])");
    EXPECT_EQ(error_of(kBase + "[failures]\ncheckpoint_policy = \"fixed\"\n"
                               "[space]\ncheckpoint_interval = [\"1 h\"]\n"),
              "no error");
}

TEST(ExperimentLoader, DpInSpaceWithGpusInDefaultsIsRejected) {
    EXPECT_EQ(error_of(kBase + "[defaults]\ngpus = 64\n[space]\ndp = [1, 2]\n"),
              "exp.toml:10:6: space.dp: dp and gpus are mutually exclusive ([defaults] sets gpus)");
}

TEST(ExperimentLoader, UnknownChoiceListsTheChoices) {
    EXPECT_EQ(error_of("[experiment]\non_error = \"ignore\"\n" + kBase),
              "exp.toml:2:12: experiment.on_error: unknown value 'ignore'; expected one of "
              "\"skip\", \"abort\"");
}

TEST(ExperimentLoader, MissingModelTableIsReported) {
    EXPECT_EQ(error_of("[training]\nglobal_batch = 8\n"), "exp.toml: missing [model] table");
}

TEST(ExperimentLoader, MissingHardwareIsReported) {
    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"),
              "exp.toml: missing [hardware.<name>] table (at least one)");
}

TEST(ExperimentLoader, MissingFileNamesThePath) {
    try {
        load_experiment("/nonexistent/dir/exp.toml");
        FAIL() << "no error";
    } catch (const prism::ConfigError& e) {
        EXPECT_STREQ(e.what(), "/nonexistent/dir/exp.toml: no such experiment file");
    }
}

TEST(ExperimentLoader, DirectoryIsNotAnExperimentFile) {
    const std::string dir = std::string(PRISM_TEST_DATA_DIR) + "/experiments";

    try {
        load_experiment(dir);
        FAIL() << "no error";
    } catch (const prism::ConfigError& e) {
        EXPECT_EQ(std::string(e.what()), dir + ": is a directory, not an experiment file");
    }
}

TEST(ExperimentLoader, MinimalFileIsOnePointWithDefaults) {
    const prism::Experiment e = parse_experiment(kBase, "dir/minimal.toml");

    EXPECT_EQ(e.name, "minimal");
    EXPECT_EQ(e.file, "dir/minimal.toml");
    EXPECT_EQ(e.text, kBase);
    EXPECT_TRUE(e.space.dimensions.empty());
    EXPECT_FALSE(e.baseline.has_value());
    EXPECT_EQ(e.model.name, "llama3-8b");
    EXPECT_EQ(e.training.global_batch_seqs, 512);
    ASSERT_EQ(e.hardware.size(), 1u);
    EXPECT_EQ(e.hardware[0].name, "h100");
    EXPECT_EQ(e.hardware[0].gpu.name, "h100-sxm");
    EXPECT_EQ(e.defaults.tp, 1);
    EXPECT_EQ(e.on_error, prism::Experiment::OnError::skip);
}

TEST(ExperimentLoader, DefaultsFollowTheHardwareAndTensorParallelism) {
    // H100 (a fitted fused-attention efficiency): flash attention; sequence parallelism with TP
    const prism::Experiment e = parse_experiment(kBase + "[space]\ntp = [1, 2]\n", "exp.toml");

    EXPECT_TRUE(e.training.flash_attention);
    EXPECT_TRUE(e.sequence_parallel_follows_tp);
    EXPECT_DOUBLE_EQ(e.constraints.max_memory_fraction, 0.96);
    // NCCL 2.x defaults: 16 connections x (4 MiB + 4,915,200 B + 512 KiB) = 154,140,672 B
    EXPECT_DOUBLE_EQ(e.memory_reserve.nccl_bytes_per_communicator, 154140672.0);
    EXPECT_DOUBLE_EQ(e.memory_reserve.cuda_context_bytes, 512.0 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(e.memory_reserve.workspace_bytes, 96.0 * 1024 * 1024);
    prism::DesignPoint p = prism::io::parse_point_assignments(e, "tp=2");
    EXPECT_TRUE(p.sequence_parallel);
    p = prism::io::parse_point_assignments(e, "tp=1");
    EXPECT_FALSE(p.sequence_parallel);
    p = prism::io::parse_point_assignments(e, "tp=2,sequence_parallel=false");
    EXPECT_FALSE(p.sequence_parallel);
}

TEST(ExperimentLoader, StatedSettingsOverrideTheDefaults) {
    const prism::Experiment a100 = parse_experiment(
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n"
        "[hardware.a100]\npreset = \"a100-80gb\"\n",
        "exp.toml");
    const prism::Experiment off = parse_experiment(
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 512\n"
        "flash_attention = false\n[hardware.h100]\npreset = \"h100-sxm\"\n"
        "[defaults]\nsequence_parallel = false\ntp = 4\n",
        "exp.toml");

    // the A100 preset has no fused-attention fit: its published runs are unfused
    EXPECT_FALSE(a100.training.flash_attention);
    EXPECT_FALSE(off.training.flash_attention);
    EXPECT_FALSE(off.sequence_parallel_follows_tp);
    EXPECT_FALSE(prism::io::parse_point_assignments(off, "tp=4").sequence_parallel);
}

TEST(ExperimentLoader, MemoryTableSizesAreChecked) {
    EXPECT_EQ(error_of(kBase + "[memory]\ncuda_context = \"1 GiB\"\nnccl_buffers = 1\n"),
              "exp.toml:9:1: unknown key 'nccl_buffers' in [memory]");
    const std::string unit = error_of(kBase + "[memory]\nworkspace = \"2 s\"\n");
    EXPECT_TRUE(unit.starts_with("exp.toml:8:13: memory.workspace: ")) << unit;
    EXPECT_NE(unit.find("size in bytes"), std::string::npos) << unit;
}

TEST(ExperimentLoader, CustomModelDefaultsKvHeadsAndFfn) {
    const prism::Experiment e = parse_experiment(
        "[model]\nlayers = 2\nhidden = 64\nheads = 4\nvocab = 100\nseq = 16\n"
        "[training]\nglobal_batch = 8\n[hardware.h]\npreset = \"a100-80gb\"\n",
        "exp.toml");

    EXPECT_EQ(e.model.name, "custom");
    EXPECT_EQ(e.model.kv_heads, 4);
    EXPECT_EQ(e.model.ffn, 256);
    EXPECT_FALSE(e.model.gated_mlp);
}

TEST(ExperimentLoader, DefaultsGpusBecomesAOneValueGpusDimension) {
    const prism::Experiment e = parse_experiment(
        kBase + "[defaults]\ngpus = 64\ntp = 8\n[space]\npp = [1, 2]\n", "exp.toml");

    EXPECT_EQ(e.defaults.tp, 8);
    EXPECT_EQ(e.defaults.dp, 8);  // 64 / (8 * 1 * 1)
    ASSERT_EQ(e.space.dimensions.size(), 2u);
    EXPECT_EQ(e.space.dimensions[1].name, "gpus");
    ASSERT_EQ(e.space.dimensions[1].values.size(), 1u);
    EXPECT_EQ(e.space.dimensions[1].values[0].i, 64);
}

TEST(ExperimentLoader, BaselineKeepsTheDefaultGpuTotal) {
    const prism::Experiment e = parse_experiment(
        "[experiment]\nbaseline = { tp = 4 }\n" + kBase + "[defaults]\ngpus = 64\ntp = 8\n",
        "exp.toml");

    ASSERT_TRUE(e.baseline.has_value());
    EXPECT_EQ(e.baseline->tp, 4);
    EXPECT_EQ(e.baseline->dp, 16);  // 64 / 4
}

TEST(ExperimentLoader, UnknownVariabilityPresetIsReported) {
    const std::string message = error_of(kBase + "[variability]\npreset = \"no-such-profile\"\n");

    EXPECT_EQ(message.substr(0, message.find(" (known: ")),
              "exp.toml:8:10: variability.preset: unknown variability preset 'no-such-profile'");
}

// full_moe.toml: every Mixture-of-Experts key (the MoE companion of full.toml), each read back.
TEST(ExperimentLoader, FullMoeFileMapsToExpectedValues) {
    const std::string path = std::string(PRISM_TEST_DATA_DIR) + "/experiments/full_moe.toml";
    const prism::Experiment e = load_experiment(path);

    const prism::ModelSpec& m = e.model;
    EXPECT_EQ(m.experts, 256);
    EXPECT_EQ(m.top_k, 8);
    EXPECT_EQ(m.shared_experts, 1);
    EXPECT_EQ(m.expert_ffn, 2048);
    EXPECT_EQ(m.dense_layers, 3);
    EXPECT_EQ(m.moe_every, 1);
    EXPECT_EQ(m.moe_layers(), 58);
    EXPECT_TRUE(m.is_mla());
    EXPECT_EQ(m.q_lora_rank, 1536);
    EXPECT_EQ(m.kv_lora_rank, 512);
    EXPECT_EQ(m.qk_nope_head_dim, 128);
    EXPECT_EQ(m.qk_rope_head_dim, 64);
    EXPECT_EQ(m.v_head_dim, 128);

    const prism::TrainingSpec& t = e.training;
    EXPECT_EQ(t.moe_dispatcher, prism::TrainingSpec::MoeDispatcher::hybridep);
    EXPECT_TRUE(t.moe_a2a_overlap);
    EXPECT_DOUBLE_EQ(t.moe_capacity_factor, 1.25);
    EXPECT_FALSE(t.moe_force_balance);
    EXPECT_FALSE(t.grad_reduce_in_fp32);
    EXPECT_FALSE(t.dropout);
    prism::TrainingSpec::RecomputeModules modules{.core_attn = false};
    modules.mla_up_proj = modules.moe_act = modules.shared_experts = true;
    EXPECT_EQ(t.recompute_modules, modules);
    EXPECT_EQ(t.layers_per_chunk.size(), 16u);

    // the GPU's ceilings times the stack's factors (gb200-nvl72 given its own here)
    ASSERT_EQ(e.hardware.size(), 1u);
    const prism::HardwareSpec& h = e.hardware[0];
    EXPECT_EQ(h.nvlink_domain, 64);
    EXPECT_DOUBLE_EQ(h.a2a_nvlink_efficiency, 0.7 * 0.9);
    EXPECT_DOUBLE_EQ(h.deepep_nvlink_efficiency, 0.4 * 0.9);
    EXPECT_DOUBLE_EQ(h.hybridep_nvlink_efficiency, 0.6 * 0.9);
    EXPECT_DOUBLE_EQ(h.a2a_nic_efficiency, 0.95 * 0.5);
    EXPECT_DOUBLE_EQ(h.grouped_gemm_factor, 0.8);
    EXPECT_DOUBLE_EQ(h.permute_factor, 0.7);
    EXPECT_DOUBLE_EQ(h.grouped_gemm_wave_experts, 4);

    EXPECT_EQ(e.defaults.ep, 64);
    EXPECT_EQ(e.defaults.etp, 1);

    const prism::VariabilitySpec& v = e.variability;
    EXPECT_DOUBLE_EQ(v.routing_skew, 0.3);  // skew overrides the aux-loss balance's
    EXPECT_EQ(v.routing_source, "skew given");
    EXPECT_DOUBLE_EQ(v.routing_drift, 0.05);
    EXPECT_TRUE(v.documents.concat);
    EXPECT_DOUBLE_EQ(v.documents.median_tokens, 1024);
    EXPECT_DOUBLE_EQ(v.documents.sigma, 1.0);
    EXPECT_EQ(v.documents.source, "a made-up corpus");
    EXPECT_FALSE(e.evaluation.routing_share);
}

TEST(ExperimentLoader, FullFileMapsToExpectedValues) {
    const std::string path = std::string(PRISM_TEST_DATA_DIR) + "/experiments/full.toml";

    const prism::Experiment e = load_experiment(path);

    EXPECT_EQ(e.file, path);
    EXPECT_EQ(e.text, read_file(path));
    EXPECT_EQ(e.name, "llama3-70b-placement");
    EXPECT_EQ(e.seed, 42u);
    EXPECT_EQ(e.on_error, prism::Experiment::OnError::abort);

    // Llama 3 70B config.json, with seq overridden.
    EXPECT_EQ(e.model.name, "llama3-70b");
    EXPECT_EQ(e.model.layers, 80);
    EXPECT_EQ(e.model.hidden, 8192);
    EXPECT_EQ(e.model.heads, 64);
    EXPECT_EQ(e.model.kv_heads, 8);
    EXPECT_EQ(e.model.ffn, 28672);
    EXPECT_TRUE(e.model.gated_mlp);
    EXPECT_EQ(e.model.vocab, 128256);
    EXPECT_EQ(e.model.seq, 4096);
    EXPECT_FALSE(e.model.tied_embeddings);

    EXPECT_EQ(e.training.global_batch_seqs, 1024);  // 4194304 tokens / 4096
    EXPECT_EQ(e.training.precision, prism::Precision::bf16);
    EXPECT_DOUBLE_EQ(e.training.total_tokens, 1.5e12);
    EXPECT_TRUE(e.training.flash_attention);
    EXPECT_FALSE(e.training.overlap_grad_reduce);
    EXPECT_FALSE(e.training.overlap_param_gather);
    EXPECT_TRUE(e.training.tp_comm_overlap);
    EXPECT_FALSE(e.training.fsdp_prefetch);
    EXPECT_TRUE(e.training.fsdp_pp_unsharded);
    EXPECT_TRUE(e.training.blocking_p2p);
    EXPECT_TRUE(e.training.bf16_optimizer);
    EXPECT_TRUE(e.training.grad_reduce_every_microbatch);
    EXPECT_TRUE(e.training.param_gather_every_microbatch);
    EXPECT_EQ(e.training.fsdp_ends, prism::TrainingSpec::FsdpEnds::root);  // the stack's: kept
    EXPECT_EQ(e.training.reduce_bucket_elements, 2.5e8);

    ASSERT_EQ(e.hardware.size(), 2u);
    const prism::HardwareSpec& h100 = e.hardware[0];
    EXPECT_EQ(h100.name, "h100");
    EXPECT_DOUBLE_EQ(h100.gpu.peak_bf16_flop_per_s, 989e12);
    EXPECT_DOUBLE_EQ(h100.gpu.hbm_bytes, 79.1 * 1024 * 1024 * 1024);  // preset "79.1 GiB"
    EXPECT_DOUBLE_EQ(h100.gpu.hbm_bytes_per_s, 3.35e12);
    EXPECT_DOUBLE_EQ(h100.nvlink_bytes_per_s, 450e9);
    EXPECT_DOUBLE_EQ(h100.nic_bytes_per_s, 25e9);  // 200 Gb/s overrides the preset's 400
    EXPECT_EQ(h100.gpus_per_node, 8);
    const prism::HardwareSpec& custom = e.hardware[1];
    EXPECT_EQ(custom.name, "custom");
    EXPECT_DOUBLE_EQ(custom.gpu.peak_bf16_flop_per_s, 500e12);
    EXPECT_DOUBLE_EQ(custom.gpu.peak_fp8_flop_per_s, 1e15);
    EXPECT_DOUBLE_EQ(custom.gpu.hbm_bytes, 96.0 * 1024 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(custom.gpu.hbm_bytes_per_s, 4e12);
    EXPECT_DOUBLE_EQ(custom.gpu.hbm_efficiency, 0.9 * 0.5);  // ceiling x [stack] factor
    EXPECT_EQ(custom.gpus_per_node, 4);
    EXPECT_DOUBLE_EQ(custom.nvlink_bytes_per_s, 300e9);
    EXPECT_DOUBLE_EQ(custom.gpu.fp8_gemm_max_efficiency, 0.6 * 0.5);
    EXPECT_DOUBLE_EQ(custom.gpu.attention_efficiency, 0.35 * 0.5);  // no fa3 ceiling
    EXPECT_DOUBLE_EQ(custom.gpu.exp_per_s, 0.0);  // no exp_rate: the MMA term alone
    EXPECT_DOUBLE_EQ(custom.nvlink_latency_s, 2e-6);
    EXPECT_DOUBLE_EQ(custom.nic_bytes_per_s, 100e9);  // 800 Gbit/s / 8
    EXPECT_DOUBLE_EQ(custom.nic_latency_s, 5e-6);
    EXPECT_DOUBLE_EQ(custom.collective_efficiency, 0.7 * 0.5);
    EXPECT_DOUBLE_EQ(custom.collective_nic_efficiency, 0.6 * 0.9);
    EXPECT_DOUBLE_EQ(h100.collective_nic_efficiency, 0.8 * 0.9);  // the preset's collective ceiling
    EXPECT_DOUBLE_EQ(custom.gpu.gemm.max_efficiency, 0.8 * 0.5);
    EXPECT_DOUBLE_EQ(custom.gpu.gemm.half_flops, 2e9);
    EXPECT_DOUBLE_EQ(custom.kernel_launch_s, 4e-6 + 1e-6);
    EXPECT_DOUBLE_EQ(custom.overlap_compute_cost, 0.1);  // the stack's, on every hardware

    EXPECT_EQ(e.cluster.nodes_per_rack, 16);
    EXPECT_EQ(e.cluster.racks_per_pod, 8);
    EXPECT_DOUBLE_EQ(e.cluster.rack_oversubscription, 2.0);
    EXPECT_DOUBLE_EQ(e.cluster.pod_oversubscription, 4.0);
    EXPECT_EQ(e.cluster.total_gpus, 4096);

    EXPECT_EQ(e.defaults.microbatch, 2);
    EXPECT_EQ(e.defaults.recompute, prism::Recompute::selective);
    EXPECT_TRUE(e.defaults.sequence_parallel);

    EXPECT_TRUE(e.space.scenarios.empty());
    const auto& dims = e.space.dimensions;
    ASSERT_EQ(dims.size(), 7u);
    EXPECT_EQ(dims[0].name, "tp");
    EXPECT_EQ(dims[1].name, "pp");
    EXPECT_EQ(dims[2].name, "gpus");
    EXPECT_EQ(dims[3].name, "zero_stage");
    EXPECT_EQ(dims[4].name, "hardware");
    EXPECT_EQ(dims[5].name, "placement");
    EXPECT_EQ(dims[6].name, "checkpoint_interval");
    ASSERT_EQ(dims[0].values.size(), 2u);
    EXPECT_EQ(dims[0].values[1].type, prism::DimensionValue::Type::integer);
    EXPECT_EQ(dims[0].values[1].i, 8);
    EXPECT_EQ(dims[4].values[1].type, prism::DimensionValue::Type::string);
    EXPECT_EQ(dims[4].values[1].s, "custom");
    ASSERT_EQ(dims[6].values.size(), 2u);
    EXPECT_EQ(dims[6].values[0].type, prism::DimensionValue::Type::number);
    EXPECT_DOUBLE_EQ(dims[6].values[0].d, 1800.0);  // "30 min"
    EXPECT_DOUBLE_EQ(dims[6].values[1].d, 3600.0);  // bare number in seconds

    ASSERT_TRUE(e.baseline.has_value());
    EXPECT_EQ(e.baseline->tp, 8);
    EXPECT_EQ(e.baseline->pp, 4);
    EXPECT_EQ(e.baseline->dp, 8);          // 256 / (8 * 4)
    EXPECT_EQ(e.baseline->microbatch, 2);  // from [defaults]

    EXPECT_EQ(e.constraints.min_gpus, 64);
    EXPECT_EQ(e.constraints.max_gpus, 1024);
    EXPECT_EQ(e.constraints.gpus_in, (std::vector<std::int64_t>{256, 512}));
    EXPECT_DOUBLE_EQ(e.constraints.max_memory_fraction, 0.9);
    EXPECT_DOUBLE_EQ(e.memory_reserve.cuda_context_bytes, 600.0 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(e.memory_reserve.workspace_bytes, 64.0 * 1024 * 1024);
    EXPECT_DOUBLE_EQ(e.memory_reserve.nccl_bytes_per_communicator, 200.0 * 1024 * 1024);

    ASSERT_EQ(e.objectives.size(), 2u);
    EXPECT_EQ(e.objectives[0].metric, "step_time_s");
    EXPECT_FALSE(e.objectives[0].maximize);
    EXPECT_EQ(e.objectives[1].metric, "mfu");
    EXPECT_TRUE(e.objectives[1].maximize);

    EXPECT_EQ(e.evaluation.method, prism::Method::montecarlo);
    EXPECT_EQ(e.evaluation.samples, 500);
    EXPECT_EQ(e.evaluation.slow_deltas, (std::vector<double>{0.1, 0.2}));
    EXPECT_TRUE(e.evaluation.histogram);
    EXPECT_EQ(e.evaluation.histogram_bins, 32);
    EXPECT_FALSE(e.evaluation.sensitivity);

    using prism::DistKind;
    using prism::KernelClass;
    const auto& transient = e.variability.transient;
    const auto& gemm = transient[static_cast<std::size_t>(KernelClass::gemm)];
    EXPECT_EQ(gemm.kind, DistKind::lognormal);
    EXPECT_DOUBLE_EQ(gemm.mean, 1.0);
    EXPECT_DOUBLE_EQ(gemm.cv, 0.05);
    const auto& attention = transient[static_cast<std::size_t>(KernelClass::attention)];
    EXPECT_EQ(attention.kind, DistKind::gamma);
    EXPECT_DOUBLE_EQ(attention.cv, 0.1);  // 1 / sqrt(shape = 100)
    EXPECT_EQ(transient[static_cast<std::size_t>(KernelClass::elementwise)].kind, DistKind::normal);
    const auto& allreduce = transient[static_cast<std::size_t>(KernelClass::allreduce)];
    EXPECT_EQ(allreduce.kind, DistKind::mixture);
    ASSERT_EQ(allreduce.components.size(), 2u);
    EXPECT_DOUBLE_EQ(allreduce.components[0].weight, 0.99);
    EXPECT_EQ(allreduce.components[0].dist.kind, DistKind::lognormal);
    EXPECT_DOUBLE_EQ(allreduce.components[1].dist.mean, 3.0);
    // Mixture moments: mean = sum w m, E[X^2] = sum w (s^2 + m^2).
    const double mix_mean = 0.99 * 1.0 + 0.01 * 3.0;
    const double mix_second = 0.99 * (0.02 * 0.02 + 1.0) + 0.01 * 9.0;
    EXPECT_DOUBLE_EQ(allreduce.mean, mix_mean);
    EXPECT_NEAR(allreduce.cv, std::sqrt(mix_second - mix_mean * mix_mean) / mix_mean, 1e-12);
    const auto& loader = transient[static_cast<std::size_t>(KernelClass::dataloader)];
    EXPECT_EQ(loader.kind, DistKind::empirical);
    ASSERT_EQ(loader.samples.size(), 3u);
    EXPECT_DOUBLE_EQ(loader.samples[0], 0.5);  // 1 / mean 2
    EXPECT_DOUBLE_EQ(loader.samples[2], 1.5);
    EXPECT_DOUBLE_EQ(loader.mean, 1.0);
    EXPECT_NEAR(loader.cv, std::sqrt(1.0 / 6.0), 1e-12);  // population std of {0.5, 1, 1.5}
    EXPECT_EQ(transient[static_cast<std::size_t>(KernelClass::p2p)].kind, DistKind::constant);
    EXPECT_EQ(e.variability.comm_regime.kind, DistKind::constant);
    EXPECT_DOUBLE_EQ(e.variability.comm_regime.mean, 1.0);
    EXPECT_EQ(e.variability.persistent.spatial.kind, DistKind::normal);
    EXPECT_DOUBLE_EQ(e.variability.persistent.spatial.cv, 0.02);
    EXPECT_DOUBLE_EQ(e.variability.persistent.slow_probability, 0.01);
    EXPECT_DOUBLE_EQ(e.variability.persistent.slow_factor, 1.5);
    EXPECT_FALSE(e.variability.persistent.slow_per_node);

    EXPECT_TRUE(e.failures.enabled);
    EXPECT_DOUBLE_EQ(e.failures.detection_s, 120.0);
    EXPECT_DOUBLE_EQ(e.failures.restart_s, 600.0);
    EXPECT_EQ(e.failures.checkpoint_policy, prism::CheckpointPolicy::fixed);
    EXPECT_DOUBLE_EQ(e.failures.checkpoint_interval_s, 1800.0);
    EXPECT_DOUBLE_EQ(e.failures.checkpoint_bytes_per_s, 200e9);
    EXPECT_TRUE(e.failures.async_checkpoint);
    EXPECT_EQ(e.failures.deadlines_s, (std::vector<double>{30 * 86400.0, 45 * 86400.0}));
    EXPECT_DOUBLE_EQ(e.failures.straggler_detection_s, 2 * 3600.0);
    EXPECT_DOUBLE_EQ(e.failures.straggler_threshold, 0.05);
    EXPECT_DOUBLE_EQ(e.failures.straggler_replacement_s, 15 * 60.0);
    ASSERT_EQ(e.failures.causes.size(), 2u);
    EXPECT_EQ(e.failures.causes[0].name, "gpu");
    EXPECT_FALSE(e.failures.causes[0].per_node);
    EXPECT_DOUBLE_EQ(e.failures.causes[0].mtbf_s, 50000 * 3600.0);
    EXPECT_DOUBLE_EQ(e.failures.causes[0].weibull_shape, 1.0);
    EXPECT_EQ(e.failures.causes[1].name, "node");
    EXPECT_TRUE(e.failures.causes[1].per_node);
    EXPECT_DOUBLE_EQ(e.failures.causes[1].mtbf_s, 2000 * 3600.0);
    EXPECT_DOUBLE_EQ(e.failures.causes[1].weibull_shape, 0.8);

    const prism::CotuneSpec& c = e.cotune;
    EXPECT_TRUE(c.enabled);
    EXPECT_DOUBLE_EQ(c.target_loss, 2.2);
    EXPECT_EQ(c.target_tokens, 0.0);
    EXPECT_DOUBLE_EQ(c.reference_batch_tokens, 4194304.0);
    EXPECT_EQ(c.noise, prism::NoiseModel::kaplan);
    EXPECT_DOUBLE_EQ(c.kaplan.b_star_tokens, 2.1e8);
    EXPECT_DOUBLE_EQ(c.kaplan.alpha_b, 0.21);
    EXPECT_DOUBLE_EQ(c.kaplan.n_c, 8.8e13);
    EXPECT_DOUBLE_EQ(c.kaplan.alpha_n, 0.076);
    EXPECT_DOUBLE_EQ(c.kaplan.s_c, 2100.0);
    EXPECT_DOUBLE_EQ(c.kaplan.alpha_s, 0.76);
    EXPECT_DOUBLE_EQ(c.kaplan.parameters, 6.4e10);
    EXPECT_EQ(c.lr_rule, prism::LrRule::deepseek);
    EXPECT_DOUBLE_EQ(c.compute_budget_flops, 1e24);
    EXPECT_DOUBLE_EQ(c.lr_batch_exponent, 1.0);
    EXPECT_EQ(c.lr_penalty.shape, prism::LrPenaltyShape::linear);
    EXPECT_DOUBLE_EQ(c.lr_penalty.coefficient, 0.05);
    EXPECT_DOUBLE_EQ(c.warmup_steps, 2000.0);
    ASSERT_EQ(c.batch_ramp.size(), 2u);
    EXPECT_DOUBLE_EQ(c.batch_ramp[0].batch_tokens, 1048576.0);
    EXPECT_DOUBLE_EQ(c.batch_ramp[0].until_tokens, 2.52e8);
    EXPECT_DOUBLE_EQ(c.batch_ramp[1].batch_tokens, 2097152.0);
    EXPECT_DOUBLE_EQ(c.batch_ramp[1].until_tokens, 2.87e12);
}

TEST(ExperimentLoader, UnevenPipelineSplitKeys) {
    const std::string base =
        "[model]\npreset = \"llama3-405b\"\n[hardware.h100]\npreset = \"h100-sxm\"\n"
        "[training]\nglobal_batch = 512\n";  // [training] is on line 5, its keys from 7 on

    const auto slots = parse_experiment(base +
                                            "account_for_embedding_in_pipeline_split = true\n"
                                            "account_for_loss_in_pipeline_split = true\n",
                                        "exp.toml");
    const auto ends =
        parse_experiment(base + "first_stage_layers = 7\nlast_stage_layers = 7\n", "exp.toml");
    const auto list = parse_experiment(base + "layers_per_stage = [62, 64]\n", "exp.toml");

    EXPECT_TRUE(slots.training.account_for_embedding_in_pipeline_split);
    EXPECT_TRUE(slots.training.account_for_loss_in_pipeline_split);
    EXPECT_EQ(ends.training.first_stage_layers, 7);
    EXPECT_EQ(ends.training.last_stage_layers, 7);
    EXPECT_EQ(list.training.layers_per_stage, (std::vector<int>{62, 64}));
    EXPECT_EQ(error_of(base + "layers_per_stage = [62, 63]\n"),
              "exp.toml:7:20: training.layers_per_stage: the stages hold 125 layers, the model "
              "has layers = 126");
    EXPECT_EQ(error_of(base + "first_stage_layers = 7\nlayers_per_stage = [62, 64]\n"),
              "exp.toml:8:20: training.layers_per_stage: give either layers_per_stage or the "
              "other uneven split settings, not both");
    EXPECT_EQ(error_of(base + "first_stage_layers = 0\n"),
              "exp.toml:7:22: training.first_stage_layers: value 0 must be >= 1");
    EXPECT_EQ(error_of(base + "account_for_loss_in_pipeline_split = true\nlast_stage_layers = 7\n"),
              "exp.toml:8:21: training.last_stage_layers: give either first/last stage layers "
              "or the account_for_*_in_pipeline_split slots, not both");
    // Megatron-Core's layout: every virtual stage's decoder layers; only the ends may be empty
    const auto layout = parse_experiment(base + "layers_per_chunk = [0, 63, 63, 0]\n", "exp.toml");
    EXPECT_EQ(layout.training.layers_per_chunk, (std::vector<int>{0, 63, 63, 0}));
    EXPECT_EQ(error_of(base + "layers_per_chunk = [1, 0, 125, 0]\n"),
              "exp.toml:7:24: training.layers_per_chunk: value 0 must be >= 1");
    EXPECT_EQ(error_of(base + "layers_per_chunk = [63, 62]\n"),
              "exp.toml:7:20: training.layers_per_chunk: the virtual stages hold 125 layers, the "
              "model has layers = 126");
    EXPECT_EQ(error_of(base + "layers_per_chunk = [63, 63]\nlayers_per_stage = [62, 64]\n"),
              "exp.toml:8:20: training.layers_per_stage: give either layers_per_stage or "
              "layers_per_chunk, not both");
    EXPECT_EQ(error_of(base + "first_stage_layers = 7\nlayers_per_chunk = [63, 63]\n"),
              "exp.toml:8:20: training.layers_per_chunk: give either layers_per_chunk or the other "
              "uneven split settings, not both");
}

}  // namespace

TEST(ExperimentLoader, MoeModelKeysAreReadAndCheckedWithTheirLocation) {
    const std::string head = "[model]\nlayers = 4\nhidden = 64\nheads = 4\nvocab = 100\nseq = 16\n";
    const std::string tail = "[training]\nglobal_batch = 8\n[hardware.h]\npreset = \"a100-80gb\"\n";
    const prism::Experiment e = parse_experiment(
        head + "experts = 8\ntop_k = 2\nexpert_ffn = 32\ndense_layers = 1\n" + tail, "exp.toml");
    EXPECT_TRUE(e.model.is_moe());
    EXPECT_EQ(e.model.moe_layers(), 3);
    EXPECT_FALSE(e.model.is_moe_layer(0));
    EXPECT_TRUE(e.model.is_moe_layer(1));

    EXPECT_EQ(error_of(head + "top_k = 2\n" + tail),
              "exp.toml:7:9: model.top_k: needs an MoE model (give experts)");
    EXPECT_EQ(error_of(head + "experts = 8\ntop_k = 9\nexpert_ffn = 32\n" + tail),
              "exp.toml:8:9: model.top_k: give 1 to experts = 8 routed experts per token");
    EXPECT_EQ(error_of(head + "experts = 8\ntop_k = 2\nexpert_ffn = 32\ndense_layers = 4\n" + tail),
              "exp.toml:10:16: model.dense_layers: 4 leaves no MoE layer of layers = 4");
    EXPECT_EQ(error_of(head + "kv_lora_rank = 16\n" + tail),
              "exp.toml:7:16: model.kv_lora_rank: needs attention = \"mla\"");
    EXPECT_EQ(error_of(head + "attention = \"mla\"\nkv_lora_rank = 16\n" + tail),
              "exp.toml:7:13: model: missing 'qk_nope_head_dim' (attention = \"mla\")");
}

TEST(ExperimentLoader, MoeTrainingKeysNeedAnMoeModel) {
    const std::string moe = "[model]\npreset = \"mixtral-8x7b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"h100-sxm\"\n";
    const prism::Experiment e = parse_experiment(
        moe + "moe_dispatcher = \"deepep\"\nmoe_a2a_overlap = true\nmoe_capacity_factor = 1.25\n" +
            hw,
        "exp.toml");
    EXPECT_EQ(e.training.moe_dispatcher, prism::TrainingSpec::MoeDispatcher::deepep);
    EXPECT_TRUE(e.training.moe_a2a_overlap);
    EXPECT_DOUBLE_EQ(e.training.moe_capacity_factor, 1.25);
    EXPECT_TRUE(e.training.moe_force_balance);  // NVIDIA's tables force it; so does the default
    const prism::Experiment real = parse_experiment(
        moe + "moe_force_balance = false\n" + hw + "[variability]\nrouting_skew = 0.3\n",
        "exp.toml");
    EXPECT_FALSE(real.training.moe_force_balance);
    EXPECT_DOUBLE_EQ(real.variability.routing_skew, 0.3);

    EXPECT_EQ(error_of("[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
                       "moe_dispatcher = \"alltoall\"\n" +
                       hw),
              "exp.toml:5:18: training.moe_dispatcher: needs an MoE model (model.experts)");
    EXPECT_TRUE(error_of(moe + "moe_dispatcher = \"nccl\"\n" + hw)
                    .starts_with("exp.toml:5:18: training.moe_dispatcher: unknown"));
    EXPECT_EQ(parse_experiment(moe + "moe_dispatcher = \"hybridep\"\n" + hw, "exp.toml")
                  .training.moe_dispatcher,
              prism::TrainingSpec::MoeDispatcher::hybridep);
}

// The flex dispatcher's backend ceilings (b200.toml: HybridEP 0.52, DeepEP 0.38 from the HybridEP
// README's B200 table) take the stack's NVLink a2a factor too; a GPU without them keeps 0 (the
// dispatch then runs at a2a_nvlink_efficiency).
TEST(ExperimentLoader, FlexBackendCeilingsTakeTheStacksNvlinkFactor) {
    const std::string head = "[model]\npreset = \"mixtral-8x7b\"\n[training]\nglobal_batch = 8\n";
    const prism::Experiment b =
        parse_experiment(head +
                             "[stack]\npreset = \"megatron-core\"\na2a_nvlink_efficiency = 0.5\n"
                             "[hardware.b]\npreset = \"b200\"\n",
                         "exp.toml");
    EXPECT_DOUBLE_EQ(b.hardware.at(0).hybridep_nvlink_efficiency, 0.52 * 0.5);
    EXPECT_DOUBLE_EQ(b.hardware.at(0).deepep_nvlink_efficiency, 0.38 * 0.5);
    EXPECT_DOUBLE_EQ(b.hardware.at(0).a2a_nvlink_efficiency, 0.72 * 0.5);
    const prism::Experiment h =
        parse_experiment(head + "[hardware.h]\npreset = \"h100-sxm\"\n", "exp.toml");
    EXPECT_EQ(h.hardware.at(0).hybridep_nvlink_efficiency, 0);
    EXPECT_EQ(h.hardware.at(0).deepep_nvlink_efficiency, 0);
}

// Megatron-Core's --recompute-modules (docs/recompute_modules.md): its names, checked against
// the model's parts, for points with recompute = "selective".
TEST(ExperimentLoader, RecomputeModulesAreMegatronsNamesCheckedAgainstTheModel) {
    const std::string dsv3 = "[model]\npreset = \"deepseek-v3\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"h100-sxm\"\n";
    const std::string selective = "[defaults]\nrecompute = \"selective\"\n";
    const prism::Experiment e = parse_experiment(
        dsv3 + "recompute_modules = [\"mla_up_proj\", \"mlp\", \"moe_act\"]\n" + hw + selective,
        "exp.toml");
    const auto& rm = e.training.recompute_modules;
    EXPECT_TRUE(rm.mla_up_proj && rm.mlp && rm.moe_act);
    EXPECT_FALSE(rm.core_attn || rm.layernorm || rm.moe || rm.shared_experts);
    // Megatron's default: the attention core only
    const auto& d = parse_experiment(dsv3 + hw, "exp.toml").training.recompute_modules;
    EXPECT_TRUE(d.core_attn);
    EXPECT_FALSE(d.mla_up_proj || d.mlp || d.moe || d.moe_act || d.layernorm);
    // an empty list recomputes nothing; a space with a selective value is enough
    const prism::Experiment empty = parse_experiment(
        dsv3 + "recompute_modules = []\n" + hw + "[space]\nrecompute = [\"none\", \"selective\"]\n",
        "exp.toml");
    EXPECT_FALSE(empty.training.recompute_modules.core_attn);
    // `prism validate` lists them where a point is selective: given, or Megatron's default
    const auto listed = [](const prism::Experiment& x) {
        for (const prism::io::ResolvedSetting& r : prism::io::resolved_settings(x)) {
            if (r.key == "training.recompute_modules") return r.value + (r.defaulted ? " *" : "");
        }
        return std::string("absent");
    };
    EXPECT_EQ(listed(e), "[\"moe_act\", \"mla_up_proj\", \"mlp\"]");  // in Megatron's order
    EXPECT_EQ(listed(parse_experiment(dsv3 + hw + selective, "exp.toml")), "[\"core_attn\"] *");
    EXPECT_EQ(listed(parse_experiment(dsv3 + hw, "exp.toml")), "absent");  // no selective point

    EXPECT_EQ(error_of(dsv3 + "recompute_modules = [\"mla_up_proj\", \"attn\"]\n" + hw + selective),
              "exp.toml:5:37: training.recompute_modules: unknown module \"attn\"; expected one "
              "of core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts");
    EXPECT_EQ(error_of(dsv3 + "recompute_modules = [\"mlp\", \"mlp\"]\n" + hw + selective),
              "exp.toml:5:29: training.recompute_modules: \"mlp\" is listed twice");
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    EXPECT_TRUE(error_of(llama + "recompute_modules = [\"mla_up_proj\"]\n" + hw + selective)
                    .starts_with("exp.toml:5:22: training.recompute_modules: \"mla_up_proj\" "
                                 "needs multi-latent attention"));
    EXPECT_TRUE(error_of(llama + "recompute_modules = [\"moe_act\"]\n" + hw + selective)
                    .starts_with("exp.toml:5:22: training.recompute_modules: \"moe_act\" needs "
                                 "MoE layers"));
    EXPECT_TRUE(error_of(dsv3 + "recompute_modules = [\"mhc\"]\n" + hw + selective)
                    .starts_with("exp.toml:5:22: training.recompute_modules: \"mhc\" recomputes "
                                 "a part"));
    // as Megatron-Core: the modules apply to selective recomputation only
    EXPECT_EQ(error_of(dsv3 + "recompute_modules = [\"mla_up_proj\"]\n" + hw),
              "exp.toml:5:21: training.recompute_modules: applies to recompute = \"selective\" "
              "(as Megatron-Core's --recompute-modules), which no point of the experiment uses");
}

// FSDP under pipeline parallelism (docs/model.md): gathered for the step in PyTorch's pipelining
// (the torchtitan stack's default), per layer and microbatch otherwise; [training] and [stack]
// override the stack's value.
TEST(ExperimentLoader, FsdpUnderPipelineFollowsTheStackUnlessTrainingSaysOtherwise) {
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"h100-sxm\"\n";
    const auto unsharded = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.fsdp_pp_unsharded;
    };

    EXPECT_FALSE(unsharded(llama + hw));
    EXPECT_FALSE(unsharded(llama + "stack = \"megatron-core\"\n" + hw));
    EXPECT_TRUE(unsharded(llama + "stack = \"torchtitan\"\n" + hw));
    EXPECT_FALSE(unsharded(llama + "stack = \"torchtitan\"\nfsdp_pp_unsharded = false\n" + hw));
    EXPECT_TRUE(unsharded(llama + "fsdp_pp_unsharded = true\n" + hw));
    EXPECT_FALSE(
        unsharded(llama + hw + "[stack]\npreset = \"torchtitan\"\nfsdp_pp_unsharded = false\n"));
    EXPECT_EQ(error_of(llama + "fsdp_pp_unsharded = \"yes\"\n" + hw),
              "exp.toml:5:21: training.fsdp_pp_unsharded: expected a boolean, got a string");
}

// DeepSpeed's pipeline sends on the compute stream (TrainingSpec::blocking_p2p): the deepspeed
// stack's, off for every other; [training] and [stack] override it.
TEST(ExperimentLoader, BlockingPipelineSendsFollowTheStackUnlessTrainingSaysOtherwise) {
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"a100-80gb\"\n";
    const auto blocking = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.blocking_p2p;
    };

    EXPECT_FALSE(blocking(llama + hw));
    for (const char* stack : {"megatron-core", "nemo-mlperf", "llm-foundry", "torchtitan"}) {
        EXPECT_FALSE(blocking(llama + "stack = \"" + stack + "\"\n" + hw)) << stack;
    }
    EXPECT_TRUE(blocking(llama + "stack = \"deepspeed\"\n" + hw));
    EXPECT_FALSE(blocking(llama + "stack = \"deepspeed\"\nblocking_p2p = false\n" + hw));
    EXPECT_TRUE(blocking(llama + "blocking_p2p = true\n" + hw));
    EXPECT_FALSE(blocking(llama + hw + "[stack]\npreset = \"deepspeed\"\nblocking_p2p = false\n"));
    EXPECT_EQ(error_of(llama + "blocking_p2p = 1\n" + hw),
              "exp.toml:5:16: training.blocking_p2p: expected a boolean, got an integer");
}

// DeepSpeed's BF16_Optimizer (TrainingSpec::bf16_optimizer): the deepspeed stack's, off for every
// other; [training] and [stack] override it.
TEST(ExperimentLoader, Bf16OptimizerFollowsTheStackUnlessTrainingSaysOtherwise) {
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"a100-80gb\"\n";
    const auto bf16_optimizer = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.bf16_optimizer;
    };

    EXPECT_FALSE(bf16_optimizer(llama + hw));
    for (const char* stack : {"megatron-core", "nemo-mlperf", "llm-foundry", "torchtitan"}) {
        EXPECT_FALSE(bf16_optimizer(llama + "stack = \"" + stack + "\"\n" + hw)) << stack;
    }
    EXPECT_TRUE(bf16_optimizer(llama + "stack = \"deepspeed\"\n" + hw));
    EXPECT_FALSE(bf16_optimizer(llama + "stack = \"deepspeed\"\nbf16_optimizer = false\n" + hw));
    EXPECT_FALSE(
        bf16_optimizer(llama + hw + "[stack]\npreset = \"deepspeed\"\nbf16_optimizer = false\n"));
    EXPECT_EQ(error_of(llama + "bf16_optimizer = \"on\"\n" + hw),
              "exp.toml:5:18: training.bf16_optimizer: expected a boolean, got a string");
}

// How FSDP shards the word embedding and the output layer (TrainingSpec::fsdp_ends): kept
// gathered for the step under megatron-core (Megatron-FSDP's units are the layers), the root's
// under llm-foundry (FSDP1 auto-wraps the MPT blocks), units of their own for torchtitan (since
// 2025-07-28) and DeepSpeed (ZeRO-3 fetches per submodule); [training] and [stack] override it.
TEST(ExperimentLoader, FsdpEndsFollowTheStackUnlessTrainingSaysOtherwise) {
    using Ends = prism::TrainingSpec::FsdpEnds;
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"a100-80gb\"\n";
    const auto ends = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.fsdp_ends;
    };
    EXPECT_EQ(ends(llama + hw), Ends::kept);
    EXPECT_EQ(ends(llama + "stack = \"megatron-core\"\n" + hw), Ends::kept);
    EXPECT_EQ(ends(llama + "stack = \"llm-foundry\"\n" + hw), Ends::root);
    for (const char* stack : {"nemo-mlperf", "torchtitan", "deepspeed"}) {
        EXPECT_EQ(ends(llama + "stack = \"" + stack + "\"\n" + hw), Ends::units) << stack;
    }
    EXPECT_EQ(ends(llama + "stack = \"llm-foundry\"\nfsdp_ends = \"units\"\n" + hw), Ends::units);
    EXPECT_EQ(ends(llama + "stack = \"torchtitan\"\nfsdp_ends = \"root\"\n" + hw), Ends::root);
    EXPECT_EQ(ends(llama + hw + "[stack]\npreset = \"torchtitan\"\nfsdp_ends = \"kept\"\n"),
              Ends::kept);
    EXPECT_EQ(error_of(llama + "fsdp_ends = \"separate\"\n" + hw),
              "exp.toml:5:13: training.fsdp_ends: unknown value 'separate'; expected one of "
              "\"units\", \"root\", \"kept\"");
    EXPECT_EQ(error_of(llama + hw + "[stack]\nfsdp_ends = 1\n"),
              "exp.toml:8:13: stack.fsdp_ends: expected a string, got an integer");
}

// ZeRO-2's reduction in every microbatch (TrainingSpec::grad_reduce_every_microbatch): the
// deepspeed stack's (DeepSpeed's ZeRO-2) and llm-foundry's (FSDP1 SHARD_GRAD_OP under Composer),
// off for the others; [training] and [stack] override it. FSDP1's gather in every microbatch
// (param_gather_every_microbatch): llm-foundry's alone.
TEST(ExperimentLoader, GradReduceEveryMicrobatchFollowsTheStackUnlessTrainingSaysOtherwise) {
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"a100-80gb\"\n";
    const auto every = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.grad_reduce_every_microbatch;
    };

    EXPECT_FALSE(every(llama + hw));
    for (const char* stack : {"megatron-core", "nemo-mlperf", "torchtitan"}) {
        EXPECT_FALSE(every(llama + "stack = \"" + stack + "\"\n" + hw)) << stack;
    }
    EXPECT_TRUE(every(llama + "stack = \"deepspeed\"\n" + hw));
    EXPECT_TRUE(every(llama + "stack = \"llm-foundry\"\n" + hw));
    const auto gathers = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.param_gather_every_microbatch;
    };
    EXPECT_FALSE(gathers(llama + hw));
    for (const char* stack : {"megatron-core", "nemo-mlperf", "torchtitan", "deepspeed"}) {
        EXPECT_FALSE(gathers(llama + "stack = \"" + stack + "\"\n" + hw)) << stack;
    }
    EXPECT_TRUE(gathers(llama + "stack = \"llm-foundry\"\n" + hw));
    EXPECT_FALSE(
        gathers(llama + "stack = \"llm-foundry\"\nparam_gather_every_microbatch = false\n" + hw));
    EXPECT_TRUE(gathers(llama + hw + "[stack]\nparam_gather_every_microbatch = true\n"));
    EXPECT_EQ(error_of(llama + "param_gather_every_microbatch = 1\n" + hw),
              "exp.toml:5:33: training.param_gather_every_microbatch: expected a boolean, got an "
              "integer");
    EXPECT_FALSE(
        every(llama + "stack = \"deepspeed\"\ngrad_reduce_every_microbatch = false\n" + hw));
    EXPECT_FALSE(every(llama + hw +
                       "[stack]\npreset = \"deepspeed\"\ngrad_reduce_every_microbatch = false\n"));
    EXPECT_TRUE(every(llama + hw + "[stack]\ngrad_reduce_every_microbatch = true\n"));
    const auto bucket = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.reduce_bucket_elements;
    };
    EXPECT_EQ(bucket(llama + hw), 0.0);
    EXPECT_EQ(bucket(llama + "stack = \"torchtitan\"\n" + hw), 0.0);
    EXPECT_EQ(bucket(llama + "stack = \"deepspeed\"\n" + hw), 5e8);
    EXPECT_EQ(bucket(llama + "stack = \"deepspeed\"\nreduce_bucket_size = 2e8\n" + hw), 2e8);
    EXPECT_EQ(bucket(llama + hw + "[stack]\npreset = \"deepspeed\"\nreduce_bucket_size = 0\n"),
              0.0);
    EXPECT_EQ(error_of(llama + "reduce_bucket_size = -1\n" + hw),
              "exp.toml:5:22: training.reduce_bucket_size: value -1 must be >= 0");
    EXPECT_EQ(error_of(llama + "grad_reduce_every_microbatch = 2\n" + hw),
              "exp.toml:5:32: training.grad_reduce_every_microbatch: expected a boolean, got an "
              "integer");
}

// What "selective" means (docs/torchtitan_sac.md): Megatron-Core's recompute_modules unless the
// stack (torchtitan's preset) or [training] says torchtitan's op-level SAC.
TEST(ExperimentLoader, SelectiveRecomputeFollowsTheStackUnlessTrainingSaysOtherwise) {
    using Policy = prism::TrainingSpec::SelectiveRecompute;
    const std::string llama = "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n";
    const std::string hw = "[hardware.h]\npreset = \"h100-sxm\"\n";
    const std::string selective = "[defaults]\nrecompute = \"selective\"\n";
    const auto policy = [](const std::string& text) {
        return parse_experiment(text, "exp.toml").training.selective_recompute;
    };

    EXPECT_EQ(policy(llama + hw + selective), Policy::megatron);
    EXPECT_EQ(policy(llama + "stack = \"megatron-core\"\n" + hw + selective), Policy::megatron);
    EXPECT_EQ(policy(llama + "stack = \"torchtitan\"\n" + hw + selective), Policy::torchtitan_op);
    EXPECT_EQ(policy(llama + "stack = \"torchtitan\"\nselective_recompute = \"megatron\"\n" + hw +
                     selective),
              Policy::megatron);
    EXPECT_EQ(policy(llama + "selective_recompute = \"torchtitan-op\"\n" + hw + selective),
              Policy::torchtitan_op);
    EXPECT_EQ(policy(llama + hw +
                     "[stack]\npreset = \"torchtitan\"\nselective_recompute = "
                     "\"megatron\"\n" +
                     selective),
              Policy::megatron);
    // `prism validate` lists it where a point can be selective, and the modules only with
    // Megatron's policy
    const auto listed = [](const std::string& text, const std::string& key) {
        for (const prism::io::ResolvedSetting& r :
             prism::io::resolved_settings(parse_experiment(text, "exp.toml"))) {
            if (r.key == key) return r.value + (r.defaulted ? " *" : "");
        }
        return std::string("absent");
    };
    const std::string titan = llama + "stack = \"torchtitan\"\n" + hw;
    EXPECT_EQ(listed(titan + selective, "training.selective_recompute"), "\"torchtitan-op\" *");
    EXPECT_EQ(listed(titan + selective, "training.recompute_modules"), "absent");
    EXPECT_EQ(listed(llama + hw + selective, "training.selective_recompute"), "\"megatron\" *");
    EXPECT_EQ(listed(titan, "training.selective_recompute"), "absent");

    EXPECT_EQ(error_of(llama + "selective_recompute = \"op\"\n" + hw + selective),
              "exp.toml:5:23: training.selective_recompute: unknown value 'op'; expected one of "
              "\"megatron\", \"torchtitan-op\"");
    // Megatron's modules and torchtitan's op policy are two answers to one question
    EXPECT_EQ(error_of(llama + "stack = \"torchtitan\"\nrecompute_modules = [\"layernorm\"]\n" +
                       hw + selective),
              "exp.toml:6:21: training.recompute_modules: Megatron-Core's modules, but the "
              "selective points recompute by torchtitan's op policy (selective_recompute = "
              "\"torchtitan-op\", from training.stack); give selective_recompute = \"megatron\" "
              "to use the modules");
    // modelled for dense models with standard attention: reported where it was chosen
    const std::string mixtral =
        "[model]\npreset = \"mixtral-8x7b\"\n[training]\nglobal_batch = 8\n";
    EXPECT_EQ(error_of(mixtral + "stack = \"torchtitan\"\n" + hw + selective),
              "exp.toml:5:9: training.stack: the stack's selective_recompute = \"torchtitan-op\" "
              "is modelled for dense models: model.experts = 8 (MoE) with recompute = "
              "\"selective\"");
    EXPECT_EQ(error_of(llama +
                       "selective_recompute = \"torchtitan-op\"\nflash_attention = "
                       "false\n" +
                       hw + selective),
              "exp.toml:5:23: training.selective_recompute: \"torchtitan-op\" saves the outputs "
              "of SDPA's fused attention kernels: needs flash_attention = true with recompute = "
              "\"selective\"");
    // without a selective point the policy is moot: an MoE model may run the torchtitan stack
    EXPECT_EQ(policy(mixtral + "stack = \"torchtitan\"\n" + hw), Policy::torchtitan_op);
}

TEST(ExperimentLoader, RoutingVariabilityTableSetsTheSkewFromTheBalancing) {
    const std::string moe =
        "[model]\npreset = \"mixtral-8x7b\"\n[training]\nglobal_batch = 8\n"
        "moe_force_balance = false\n[hardware.h]\npreset = \"h100-sxm\"\n"
        "[variability.routing]\n";
    const prism::Experiment aux =
        parse_experiment(moe + "balance = \"aux-loss\"\ndrift = 0.05\n", "exp.toml");
    EXPECT_DOUBLE_EQ(aux.variability.routing_skew, 0.180);
    EXPECT_DOUBLE_EQ(aux.variability.routing_drift, 0.05);
    EXPECT_NE(aux.variability.routing_source.find("2408.15664"), std::string::npos);
    // an explicit skew amends the balancing's, in any order
    const prism::Experiment own =
        parse_experiment(moe + "skew = 0.3\nbalance = \"loss-free\"\n", "exp.toml");
    EXPECT_DOUBLE_EQ(own.variability.routing_skew, 0.3);

    EXPECT_EQ(error_of(moe + "drift = 3\n"),
              "exp.toml:9:9: variability.routing.drift: value 3 must be <= 2 (the log-space sd of "
              "an expert's popularity from step to step)");
    EXPECT_TRUE(error_of(moe + "balance = \"sinkhorn\"\n")
                    .starts_with("exp.toml:9:11: variability.routing.balance: unknown"));
    EXPECT_EQ(error_of(moe + "skw = 0.1\n"),
              "exp.toml:9:1: unknown key 'skw' in [variability.routing]; did you mean 'skew'?");
}

TEST(ExperimentLoader, DocumentsVariabilityTableSetsTheLengthLaw) {
    const std::string head =
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n[hardware.h]\n"
        "preset = \"h100-sxm\"\n[variability.documents]\n";
    const prism::Experiment e = parse_experiment(
        head +
            "packing = \"concat\"\nfamily = \"lognormal\"\nmedian_tokens = 900\nsigma = 1.4\n"
            "source = \"our corpus\"\n",
        "exp.toml");
    EXPECT_TRUE(e.variability.documents.active());
    EXPECT_DOUBLE_EQ(e.variability.documents.median_tokens, 900.0);
    EXPECT_DOUBLE_EQ(e.variability.documents.sigma, 1.4);
    EXPECT_EQ(e.variability.documents.source, "our corpus");
    // "causal" is the default behaviour: no term, whatever else the table says
    const prism::Experiment causal =
        parse_experiment(head + "packing = \"causal\"\nmedian_tokens = 900\n", "exp.toml");
    EXPECT_FALSE(causal.variability.documents.active());
    EXPECT_TRUE(causal.variability.documents == prism::DocumentLengths{});
    const prism::Experiment unset = parse_experiment(
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n[hardware.h]\n"
        "preset = \"h100-sxm\"\n",
        "exp.toml");
    EXPECT_TRUE(unset.variability.documents == prism::DocumentLengths{});

    EXPECT_EQ(error_of(head + "median_tokens = 900\nsigma = 5\n"),
              "exp.toml:9:9: variability.documents.sigma: value 5 must be <= 4 (the log-space sd "
              "of a document's length)");
    EXPECT_EQ(error_of(head + "sigma = 1\n"),
              "exp.toml:7:1: variability.documents: packing = \"concat\" needs median_tokens (the "
              "documents' median length in tokens)");
    EXPECT_TRUE(error_of(head + "packing = \"varlen\"\nmedian_tokens = 900\n")
                    .starts_with("exp.toml:8:11: variability.documents.packing: unknown"));
    EXPECT_TRUE(error_of(head + "family = \"gamma\"\nmedian_tokens = 900\n")
                    .starts_with("exp.toml:8:10: variability.documents.family: unknown"));
    EXPECT_TRUE(error_of(head + "median_tokens = -3\n")
                    .starts_with("exp.toml:8:17: variability.documents.median_tokens"));
    EXPECT_EQ(error_of(head + "median_tokens = 900\nsigm = 1\n"),
              "exp.toml:9:1: unknown key 'sigm' in [variability.documents]; did you mean "
              "'sigma'?");
}

namespace prism::test {
namespace {

TEST(ExperimentLoader, StragglerDrainingKeysAndTheirErrors) {
    const std::string failures = "[failures]\nrestart = \"10 min\"\n";
    const Experiment e = io::parse_experiment(
        kBaseExperiment + failures + "straggler_detection = \"2 h\"\nstraggler_threshold = 0.1\n",
        "exp.toml");
    EXPECT_DOUBLE_EQ(e.failures.straggler_detection_s, 7200.0);
    EXPECT_DOUBLE_EQ(e.failures.straggler_threshold, 0.1);
    EXPECT_DOUBLE_EQ(e.failures.straggler_replacement_s, 600.0);  // restart by default
    const Experiment off = io::parse_experiment(kBaseExperiment + failures, "exp.toml");
    EXPECT_EQ(off.failures.straggler_detection_s, 0.0);
    EXPECT_EQ(loader_error_of(kBaseExperiment + failures +
                              "straggler_detection = \"2 h\"\nstraggler_threshold = 0\n"),
              "exp.toml:10:23: failures.straggler_threshold: 0 must be > 0 (the relative "
              "slowdown of the mean step that flags a straggler)");
    EXPECT_EQ(loader_error_of(kBaseExperiment + failures + "straggler_replacement = \"5 min\"\n"),
              "exp.toml:9:25: failures.straggler_replacement: needs failures.straggler_detection "
              "(when a straggler is drained)");
}

}  // namespace
}  // namespace prism::test

// gemm_sustained (docs/calibration.md, "Sustained BF16 GEMMs on Hopper"): the fraction of the
// BF16 GEMM ceiling training sustains on the GPU, applied with the stack's factor; the FP8
// curve keeps its own ceiling. A fraction: above 1 is an error naming the key.
TEST(ExperimentLoader, GemmSustainedScalesTheBf16CeilingWithTheStacksFactor) {
    const std::string head =
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
        "[stack]\npreset = \"megatron-core\"\ngemm_efficiency = 0.5\n"
        "fp8_gemm_efficiency = 1\n";
    auto h100 = [&](const std::string& sustained) {
        return parse_experiment(head +
                                    "[hardware.h]\npreset = \"h100-sxm\"\n"
                                    "gemm_max_efficiency = 0.8\nfp8_gemm_max_efficiency = 0.7\n"
                                    "gemm_sustained = " +
                                    sustained + "\n",
                                "exp.toml");
    };
    const prism::Experiment full = h100("1");
    const prism::Experiment half = h100("0.25");
    EXPECT_DOUBLE_EQ(full.hardware.at(0).gpu.gemm.max_efficiency, 0.8 * 0.5);
    EXPECT_DOUBLE_EQ(half.hardware.at(0).gpu.gemm.max_efficiency, 0.8 * 0.5 * 0.25);
    EXPECT_DOUBLE_EQ(half.hardware.at(0).gpu.fp8_gemm_max_efficiency, 0.7);
    // the A100 preset has none: its BF16 rows are what megatron-core's factor is fitted on
    const prism::Experiment a100 = parse_experiment(
        head + "[hardware.a]\npreset = \"a100-80gb\"\ngemm_max_efficiency = 0.8\n", "exp.toml");
    EXPECT_DOUBLE_EQ(a100.hardware.at(0).gpu.gemm.max_efficiency, 0.8 * 0.5);
    const std::string error =
        error_of(head + "[hardware.h]\npreset = \"h100-sxm\"\ngemm_sustained = 1.2\n");
    EXPECT_NE(error.find("hardware.h.gemm_sustained"), std::string::npos) << error;
    EXPECT_NE(error.find("exp.toml"), std::string::npos) << error;
}

// attention_sustained (docs/calibration.md, "Attention at the power limit on Hopper"): the
// fraction of the attention ceiling training sustains at the GPU's power limit, applied with the
// stack's factor to the kernel's tensor-core and exponential rates alike, whatever its kernel
// family; 1 where not given (no preset gives it), above 1 an error naming the key.
TEST(ExperimentLoader, AttentionSustainedScalesTheAttentionKernelWithTheStacksFactor) {
    const std::string head =
        "[model]\npreset = \"llama3-8b\"\n[training]\nglobal_batch = 8\n"
        "[stack]\npreset = \"megatron-core\"\nattention_efficiency = 0.5\n";
    auto h100 = [&](const std::string& kernel, const std::string& extra) {
        return parse_experiment(head + "attention_kernel = \"" + kernel +
                                    "\"\n[hardware.h]\npreset = \"h100-sxm\"\n"
                                    "attention_efficiency = 0.6\nattention_efficiency_fa2 = 0.3\n"
                                    "exp_rate = 4e12\n" +
                                    extra,
                                "exp.toml");
    };
    const prism::GpuSpec plain = h100("cudnn", "").hardware.at(0).gpu;
    EXPECT_DOUBLE_EQ(plain.attention_sustained, 1.0);
    EXPECT_DOUBLE_EQ(plain.attention_efficiency, 0.6 * 0.5);
    EXPECT_DOUBLE_EQ(plain.exp_per_s, 4e12 * 0.5);
    const prism::GpuSpec capped = h100("cudnn", "attention_sustained = 0.8\n").hardware.at(0).gpu;
    EXPECT_DOUBLE_EQ(capped.attention_efficiency, 0.6 * 0.5 * 0.8);
    EXPECT_DOUBLE_EQ(capped.exp_per_s, 4e12 * 0.5 * 0.8);
    // the GEMMs keep theirs
    EXPECT_DOUBLE_EQ(capped.gemm.max_efficiency, plain.gemm.max_efficiency);
    const prism::GpuSpec fa2 = h100("fa2", "attention_sustained = 0.8\n").hardware.at(0).gpu;
    EXPECT_DOUBLE_EQ(fa2.attention_efficiency, 0.3 * 0.5 * 0.8);
    const std::string error =
        error_of(head + "[hardware.h]\npreset = \"h100-sxm\"\nattention_sustained = 1.2\n");
    EXPECT_NE(error.find("hardware.h.attention_sustained"), std::string::npos) << error;
    EXPECT_NE(error.find("exp.toml"), std::string::npos) << error;
}
