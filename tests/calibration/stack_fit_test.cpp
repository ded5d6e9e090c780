// The stack fit of prism_calibrate (tools/calibration/stack_fit.hpp) against a known truth: rows
// whose "measured" values the model generated from chosen stack factors. The fit must reproduce
// them, and a source left out must be predicted from the others (the same factors underneath).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/experiment_loader.hpp"
#include "tools/calibration/stack_fit.hpp"

namespace {

using namespace prism;
using namespace prism::calibration;

/// SC'21, NeMo 24.07 and the MLPerf medians (megatron-core and nemo-mlperf rows), their measured
/// values replaced by the model's with `truth` (factors per stack).
std::vector<Item> synthetic_rows(const std::map<std::string, Factors>& truth) {
    std::vector<Item> items;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        const std::string& set = it.row.c.set;
        if (set != "megatron-sc21" && set != "nemo-24.07" && set.rfind("mlperf-", 0) != 0) continue;
        set_factors(it, truth.at(it.row.c.stack));
        it.row.c.measured = predict_item(it);
        items.push_back(std::move(it));
    }
    return items;
}

/// Stack factors: BF16 GEMM, FP8 GEMM, attention, HBM, collectives, host time per kernel.
Factors factors(double gemm, double fp8, double attention, double hbm, double collective,
                double host_s) {
    Factors f;
    f.gemm = gemm;
    f.fp8_gemm = fp8;
    f.attention = attention;
    f.hbm = hbm;
    f.collective = collective;
    f.kernel_launch_s = host_s;
    return f;
}

TEST(StackFit, ReproducesRowsGeneratedFromKnownFactorsAndPredictsALeftOutSource) {
    const Factors core = factors(0.8, 0.85, 0.6, 0.9, 0.55, 3e-6);
    Factors mlperf = core;
    mlperf.fp8_gemm = 0.95;
    mlperf.attention = 0.5;
    mlperf.collective = 0.75;
    const std::map<std::string, Factors> truth{{"megatron-core", core}, {"nemo-mlperf", mlperf}};
    std::vector<Item> items = synthetic_rows(truth);
    ASSERT_EQ(items.size(), 30u);  // 10 + 12 + 8

    const auto fitted = fit_all(items, "", Shrinkage::off);
    for (const auto& [source, e] : errors(items, fitted)) {
        std::printf("  in sample %-20s MAPE %.3f%%\n", source.c_str(), 100 * e.s.mean_abs);
        EXPECT_LT(e.s.mean_abs, 0.01) << source;
    }
    const std::string left_out = "mlperf-v5.0-nebius";  // the H200 row: no other H200 source
    const auto without = fit_all(items, left_out, Shrinkage::off);
    const SourceError e = errors(items, without, left_out).at(left_out);
    std::printf("  left out %s: error %.3f%%\n", left_out.c_str(), 100 * e.s.mean_abs);
    EXPECT_LT(e.s.mean_abs, 0.02);
}

// A stack whose only rows are left out is predicted with megatron-core's factors (deepspeed's
// host time per kernel: the measured eager one, kEagerHostTime_s).
TEST(StackFit, AStackWithNoRowsLeftTakesMegatronCoresFactors) {
    std::vector<Item> items;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        if (it.row.c.set == "megatron-sc21" || it.row.c.set == "bloom-176b") {
            items.push_back(std::move(it));
        }
    }
    const auto f = fit_all(items, "bloom-176b");
    const Factors& core = f.at("megatron-core");
    const Factors& ds = f.at("deepspeed");
    EXPECT_EQ(ds.gemm, core.gemm);
    EXPECT_EQ(ds.hbm, core.hbm);
    EXPECT_EQ(ds.collective, core.collective);
    EXPECT_EQ(ds.kernel_launch_s, kEagerHostTime_s);
}

/// Kernels the model counts per layer (forward + backward, recomputation's forward included) in
/// the deepspeed stack: with one second of host time per kernel every layer pass is host-bound,
/// so two layers' step less one layer's is that count in seconds.
double model_kernels_per_layer(int hidden, int heads, int seq, int batch, bool recompute) {
    const auto step = [&](int layers) {
        const Experiment e = io::parse_experiment(
            fmt::format("[model]\nlayers = {}\nhidden = {}\nheads = {}\nffn = {}\nvocab = 1024\n"
                        "seq = {}\ngated_mlp = false\n[training]\nglobal_batch = {}\n"
                        "flash_attention = false\n[stack]\npreset = \"deepspeed\"\n"
                        "kernel_launch = \"1 s\"\n[hardware.gpu]\npreset = \"h200\"\n"
                        "[defaults]\ntp = 1\npp = 1\ndp = 1\nmicrobatch = {}\nrecompute = \"{}\"\n",
                        layers, hidden, heads, 4 * hidden, seq, batch, batch,
                        recompute ? "full" : "none"),
            "kernels.toml");
        return evaluate_deterministic(e, e.defaults).step_time_s;
    };
    return step(2) - step(1);
}

// The deepspeed stack's host time per kernel is measured (stack_fit.hpp, kEagerHostTime_s):
// eager PyTorch GPT layers on the H200 machine's Xeon, host-bound (the GPU busy less than half
// the step), host time per layer over the kernels the model counts in the same configuration
// (rounded to whole kernels); the constant is the median of those runs.
TEST(StackFit, DeepspeedHostTimeIsTheMeasuredEagerLayerOverTheModelsKernels) {
    const Table t = read_table(data_file(PRISM_TEST_DATA_DIR, "h200_eager_host.csv"));
    std::vector<double> per_kernel;
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
        const double step = t.number(i, "step_ms") * 1e-3;
        if (t.number(i, "gpu_kernels_ms") * 1e-3 > 0.5 * step) continue;
        const double kernels = std::round(model_kernels_per_layer(
            int(t.number(i, "hidden")), int(t.number(i, "heads")), int(t.number(i, "seq")),
            int(t.number(i, "batch")), t.number(i, "recompute") != 0));
        per_kernel.push_back(step / t.number(i, "layers") / kernels);
        std::printf(
            "  h %5.0f, %2.0f layers, recompute %.0f: %.0f us per layer, %.0f kernels in "
            "the model, %.1f us per kernel\n",
            t.number(i, "hidden"), t.number(i, "layers"), t.number(i, "recompute"),
            1e6 * step / t.number(i, "layers"), kernels, 1e6 * per_kernel.back());
    }
    ASSERT_EQ(per_kernel.size(), 5u);
    std::sort(per_kernel.begin(), per_kernel.end());
    EXPECT_NEAR(per_kernel[2] / kEagerHostTime_s, 1.0, 0.01);
}

// A stack whose rows need tens of microseconds of host time per kernel gets it back even though
// the fit starts from megatron-core's (0 here): vTrain's single-node rows (every 10th of the
// fit's) generated with 80 us, the deepspeed stack's other factors away from megatron-core's
// but its GEMMs (Megatron-DeepSpeed's are megatron-core's cuBLAS GEMMs: not fitted, taken).
TEST(StackFit, RecoversALargeHostTimeFromMegatronCoresZero) {
    Factors core;
    core.gemm = 0.85;
    core.hbm = 0.95;
    core.collective = 0.58;
    core.kernel_launch_s = 0;
    Factors ds = core;
    ds.hbm = 0.8;
    ds.collective = 0.36;
    ds.kernel_launch_s = 80e-6;
    const std::map<std::string, Factors> truth{{"megatron-core", core}, {"deepspeed", ds}};
    std::vector<Item> items;
    int vtrain = 0;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        const std::string& set = it.row.c.set;
        if (set != "megatron-sc21" && !(set == "vtrain" && vtrain++ % 10 == 0)) continue;
        set_factors(it, truth.at(it.row.c.stack));
        it.row.c.measured = predict_item(it);
        items.push_back(std::move(it));
    }
    ASSERT_EQ(items.size(), 10u + 36u);

    const auto fitted = fit_all(items, "", Shrinkage::off);
    const Factors& f = fitted.at("deepspeed");
    std::printf("  deepspeed fitted: gemm %.3f hbm %.3f collectives %.3f host %.1f us\n", f.gemm,
                f.hbm, f.collective, 1e6 * f.kernel_launch_s);
    EXPECT_NEAR(f.kernel_launch_s, ds.kernel_launch_s, 0.05 * ds.kernel_launch_s);
    EXPECT_EQ(f.gemm, fitted.at("megatron-core").gemm);
    EXPECT_LT(errors(items, fitted).at("vtrain").s.mean_abs, 0.01);
}

// Rows fewer than a stack's free keys do not determine them: the stack keeps megatron-core's
// factors (a leave-one-source-out fold with one small source left: Trainy's 2 rows for
// torchtitan's 5 keys). Trainy's rows generated with torchtitan factors away from
// megatron-core's: alone they do not move them; with the 2024-12 table's 12 rows beside them the
// stack is fitted (and recovers the FP8 GEMM factor both tables ran).
TEST(StackFit, AStackWithFewerRowsThanKeysKeepsMegatronCoresFactors) {
    const Factors core = factors(0.85, 0.9, 0.6, 0.9, 0.6, 1e-6);
    Factors tt = core;
    tt.fp8_gemm = 0.75;
    tt.attention = 0.5;
    const std::map<std::string, Factors> truth{{"megatron-core", core}, {"torchtitan", tt}};
    std::vector<Item> items;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        const std::string& set = it.row.c.set;
        if (set != "megatron-sc21" && it.row.c.stack != "torchtitan") continue;
        if (set == "torchtitan-2025-06") continue;  // two sources of torchtitan's: 2024-12, Trainy
        set_factors(it, truth.at(it.row.c.stack));
        it.row.c.measured = predict_item(it);
        items.push_back(std::move(it));
    }
    ASSERT_EQ(items.size(), 10u + 12u + 2u);
    const auto alone = fit_all(items, "torchtitan-2024-12", Shrinkage::off);
    Factors kept = alone.at("torchtitan"), core_fit = alone.at("megatron-core");
    for (Key k : {Key::gemm, Key::fp8_gemm, Key::attention, Key::hbm, Key::collective}) {
        EXPECT_EQ(field(kept, k), field(core_fit, k)) << key_name(k);
    }
    const auto both = fit_all(items, "", Shrinkage::off);
    EXPECT_NEAR(both.at("torchtitan").fp8_gemm, tt.fp8_gemm, 0.02);
}

// The collective factor across NVLink domains (PRISM_CALIBRATE_NIC_FREE, docs/calibration.md,
// "One collective factor or one per link level"): megatron-core's rows generated with NVLink
// collectives at 0.6 and inter-node ones at 0.9 of the GPUs' ceilings. With the key free the
// fit recovers both, and the rows then fit; with one collective factor for both levels (the
// presets' fit) they do not: the two levels are told apart by these rows when they differ.
TEST(StackFit, RecoversACollectiveFactorAcrossNodesOfItsOwnWhenFreed) {
    Factors core = factors(0.85, 0.9, 0.6, 0.9, 0.6, 1e-6);
    core.collective_nic = 0.9;
    std::vector<Item> items;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        if (it.row.c.stack != "megatron-core") continue;
        set_factors(it, core);
        it.row.c.measured = predict_item(it);
        items.push_back(std::move(it));
    }
    ASSERT_GE(items.size(), 40u);
    auto worst = [&](const Factors& f) {
        double out = 0;
        for (Item& it : items) {
            set_factors(it, f);
            out = std::max(out, std::abs(relative_error(predict_item(it), it.row.c.measured)));
        }
        return out;
    };
    ::setenv("PRISM_CALIBRATE_NIC_FREE", "megatron-core", 1);
    const Factors freed = fit_all(items, "", Shrinkage::off).at("megatron-core");
    ::unsetenv("PRISM_CALIBRATE_NIC_FREE");
    const Factors one = fit_all(items, "", Shrinkage::off).at("megatron-core");
    std::printf(
        "  freed: collective %.4f, across nodes %.4f (worst row %.2f%%); one factor %.4f "
        "(worst row %.2f%%)\n",
        freed.collective, freed.collective_nic, 100 * worst(freed), one.collective,
        100 * worst(one));
    EXPECT_NEAR(freed.collective, 0.6, 0.03);
    EXPECT_NEAR(freed.collective_nic, 0.9, 0.05);
    EXPECT_LT(one.collective_nic, 0.0);  // not a key: the collective factor serves both levels
    EXPECT_LT(worst(freed), 0.01);
    EXPECT_GT(worst(one), worst(freed));
}

// PRISM_CALIBRATE_ATTENTION_SUSTAINED (docs/calibration.md, "Attention at the power limit on
// Hopper"): fused attention on the H100 / H200 rows at that fraction of what the stack's factor
// gives, its exponentials too; the B200 rows and the GEMMs untouched; a value outside (0, 1] is
// refused.
TEST(StackFit, AttentionSustainedSlowsHopperAttentionOnly) {
    Item* h100 = nullptr;
    Item* b200 = nullptr;
    std::vector<Item> items = load_items(PRISM_TEST_DATA_DIR, 4);
    for (Item& it : items) {
        if (it.row.c.set == "nemo-24.03-long" && it.row.c.seq == 1048576) h100 = &it;
        if (it.row.c.set == "nemo-25.04-long" && it.row.c.seq == 1048576) b200 = &it;
    }
    ASSERT_NE(h100, nullptr);
    ASSERT_NE(b200, nullptr);
    Factors f = factors(0.85, 0.9, 0.6, 0.9, 0.6, 1e-6);
    for (Item* it : {h100, b200}) {
        f.attention_sustained = 1;
        set_factors(*it, f);
        const GpuSpec plain = it->e.hardware.at(0).gpu;
        const double step = predict_item(*it);
        f.attention_sustained = 0.8;
        set_factors(*it, f);
        const GpuSpec held = it->e.hardware.at(0).gpu;
        const double k = it == h100 ? 0.8 : 1.0;
        EXPECT_DOUBLE_EQ(held.attention_efficiency, plain.attention_efficiency * k);
        EXPECT_DOUBLE_EQ(held.exp_per_s, plain.exp_per_s * k);
        EXPECT_DOUBLE_EQ(held.gemm.max_efficiency, plain.gemm.max_efficiency);
        EXPECT_DOUBLE_EQ(held.fp8_gemm_max_efficiency, plain.fp8_gemm_max_efficiency);
        // the 1M-token step is mostly attention: at 0.8 it takes more than a fifth longer
        if (it == h100) {
            EXPECT_GT(predict_item(*it), 1.2 * step);
        } else {
            EXPECT_DOUBLE_EQ(predict_item(*it), step);
        }
    }
    EXPECT_DOUBLE_EQ(attention_sustained_from_env(), 1.0);
    ::setenv("PRISM_CALIBRATE_ATTENTION_SUSTAINED", "0.887", 1);
    EXPECT_DOUBLE_EQ(attention_sustained_from_env(), 0.887);
    ::setenv("PRISM_CALIBRATE_ATTENTION_SUSTAINED", "1.5", 1);
    EXPECT_THROW(attention_sustained_from_env(), ConfigError);
    ::unsetenv("PRISM_CALIBRATE_ATTENTION_SUSTAINED");
}

}  // namespace

// Sustained BF16 GEMMs on Hopper (docs/calibration.md): the presets' gemm_sustained is measured,
// and hopper_bf16_over_core is the check on it: each stack fitted on BF16 rows of its own on
// Hopper, its BF16 GEMM factor over megatron-core's. Truth: megatron-core's BF16 GEMM factor 0.85
// on SC'21's A100 rows; llm-foundry's H100 BF16 rows generated at 0.80 x that (9 rows: its GEMM
// factor is recovered), torchtitan's two 2024-12 BF16 rows at 0.90 x (two rows do not pin five
// factors: whatever the fit lands on, the check reports it). With torchtitan's source left out
// the check has no torchtitan entry; megatron-core's factor is the same either way (no stack's
// fit feeds another's GEMM factor any more).
TEST(StackFit, HopperBf16CheckIsEachStacksGemmFactorOverMegatronCores) {
    const Factors core = factors(0.85, 0.9, 0.6, 0.9, 0.6, 1e-6);
    Factors lf = core, tt = core;
    lf.gemm = 0.85 * 0.80;
    tt.gemm = 0.85 * 0.90;
    const std::map<std::string, Factors> truth{
        {"megatron-core", core}, {"llm-foundry", lf}, {"torchtitan", tt}};
    std::vector<Item> items;
    int foundry = 0;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        const Case& c = it.row.c;
        const bool keep = c.set == "megatron-sc21" ||
                          (c.set == "llm-foundry" && c.precision == "bf16" && foundry++ % 6 == 0) ||
                          (c.set == "torchtitan-2024-12" && c.precision == "bf16");
        if (!keep) continue;
        set_factors(it, truth.at(c.stack));
        it.row.c.measured = predict_item(it);
        items.push_back(std::move(it));
    }
    ASSERT_EQ(items.size(), 10u + 9u + 2u);
    const auto f = fit_all(items, "", Shrinkage::off);
    const auto check = hopper_bf16_over_core(items, f);
    std::printf("  megatron-core %.4f; llm-foundry / core %.4f, torchtitan / core %.4f\n",
                f.at("megatron-core").gemm, check.at("llm-foundry"), check.at("torchtitan"));
    EXPECT_NEAR(f.at("megatron-core").gemm, core.gemm, 0.005);
    ASSERT_EQ(check.size(), 2u);
    EXPECT_NEAR(check.at("llm-foundry"), 0.80, 0.01);
    EXPECT_NEAR(check.at("torchtitan"), f.at("torchtitan").gemm / f.at("megatron-core").gemm,
                1e-12);
    const auto without = fit_all(items, "torchtitan-2024-12", Shrinkage::off);
    const auto check_without = hopper_bf16_over_core(items, without, "torchtitan-2024-12");
    EXPECT_EQ(check_without.count("torchtitan"), 0u);
    EXPECT_NEAR(check_without.at("llm-foundry"), check.at("llm-foundry"), 0.005);
    EXPECT_NEAR(without.at("megatron-core").gemm, f.at("megatron-core").gemm, 1e-9);
}

// The measured gemm_sustained against an independent team's training rows: torchtitan's BF16
// rows on Hopper (the 2024-12 and 2025-06 tables, Grand Teton H100s) fitted on the presets'
// ceiling x the H200 kernel's sustained fraction ask for a BF16 GEMM factor within 3% of
// megatron-core's A100-fitted one (1.010 on model 2026.11.29.3). A factor far from it would say
// the die's power-capped rate does not account for what those runs sustain.
TEST(StackFit, MeasuredSustainedFractionAccountsForTorchtitansHopperBf16Rows) {
    std::vector<Item> items;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        const std::string& stack = it.row.c.stack;
        if (stack == "megatron-core" || stack == "torchtitan") items.push_back(std::move(it));
    }
    const auto f = fit_all(items, "");
    const double r = hopper_bf16_over_core(items, f).at("torchtitan");
    std::printf("  torchtitan's BF16 GEMM factor %.4f of megatron-core's %.4f\n", r,
                f.at("megatron-core").gemm);
    EXPECT_NEAR(r, 1.0, 0.03);
}

// The shrinkage toward megatron-core's factors (prior_weight) against a brute-force minimum of
// the objective it states: BLOOM's row generated with a BF16 GEMM factor of 0.70 on the
// deepspeed stack (megatron-core's: 0.85), the GEMM factor alone fitted. The objective, written
// out here: the row's squared log error plus 0.054^2 / 0.19^2 (one source; the row sigma over
// the stacks' spread) times the squared log ratio to 0.85, minimized on a grid
// of 4,001 values. Without shrinkage the fit returns 0.70; with it, the grid's minimum, strictly
// between 0.70 and 0.85.
TEST(StackFit, ShrinkageIsTheMinimumOfTheRowErrorPlusTheGaussianPrior) {
    const Factors core = factors(0.85, 0.9, 0.6, 0.9, 0.6, 1e-6);
    std::vector<Item> items;
    for (Item& it : load_items(PRISM_TEST_DATA_DIR, 4)) {
        if (it.row.c.set == "bloom-176b") items.push_back(std::move(it));
    }
    ASSERT_EQ(items.size(), 1u);
    Item& bloom = items[0];
    Factors truth = core;
    truth.gemm = 0.70;
    set_factors(bloom, truth);
    bloom.row.c.measured = predict_item(bloom);

    std::vector<Item*> rows{&bloom};
    const Factors plain = fit_stack(rows, {Key::gemm}, core, &core, Shrinkage::off);
    EXPECT_NEAR(plain.gemm, 0.70, 0.002);
    const Factors shrunk = fit_stack(rows, {Key::gemm}, core, &core, Shrinkage::on);

    const double w = (0.054 * 0.054) / (0.19 * 0.19);
    double best = 0, best_value = 1e300;
    for (int i = 0; i <= 4000; ++i) {
        const double g = 0.60 + 0.30 * i / 4000.0;
        Factors f = core;
        f.gemm = g;
        set_factors(bloom, f);
        const double d = std::log(predict_item(bloom) / bloom.row.c.measured);
        const double r = std::log(g / core.gemm);
        if (const double v = d * d + w * r * r; v < best_value) best_value = v, best = g;
    }
    std::printf("  GEMM factor: truth 0.70, megatron-core 0.85; fitted %.4f, grid %.4f\n",
                shrunk.gemm, best);
    EXPECT_NEAR(shrunk.gemm, best, 0.002);
    EXPECT_GT(shrunk.gemm, 0.702);
    EXPECT_LT(shrunk.gemm, 0.848);
}
