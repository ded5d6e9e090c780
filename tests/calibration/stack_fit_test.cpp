// The stack fit of prism_calibrate (tools/calibration/stack_fit.hpp) against a known truth: rows
// whose "measured" values the model generated from chosen stack factors. The fit must reproduce
// them, and a source left out must be predicted from the others (the same factors underneath).

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

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

TEST(StackFit, ReproducesRowsGeneratedFromKnownFactorsAndPredictsALeftOutSource) {
    Factors core;
    core.gemm = 0.8;
    core.fp8_gemm = 0.85;
    core.attention = 0.6;
    core.hbm = 0.9;
    core.collective = 0.55;
    core.kernel_launch_s = 3e-6;
    Factors mlperf = core;
    mlperf.fp8_gemm = 0.95;
    mlperf.attention = 0.5;
    mlperf.collective = 0.75;
    const std::map<std::string, Factors> truth{{"megatron-core", core}, {"nemo-mlperf", mlperf}};
    std::vector<Item> items = synthetic_rows(truth);
    ASSERT_EQ(items.size(), 30u);  // 10 + 12 + 8

    const auto fitted = fit_all(items, "");
    for (const auto& [source, e] : errors(items, fitted)) {
        std::printf("  in sample %-20s MAPE %.3f%%\n", source.c_str(), 100 * e.s.mean_abs);
        EXPECT_LT(e.s.mean_abs, 0.01) << source;
    }
    const std::string left_out = "mlperf-v5.0-nebius";  // the H200 row: no other H200 source
    const auto without = fit_all(items, left_out);
    const SourceError e = errors(items, without, left_out).at(left_out);
    std::printf("  left out %s: error %.3f%%\n", left_out.c_str(), 100 * e.s.mean_abs);
    EXPECT_LT(e.s.mean_abs, 0.02);
}

// A stack whose only rows are left out is predicted with megatron-core's factors.
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
    EXPECT_EQ(ds.kernel_launch_s, core.kernel_launch_s);
}

// A stack whose rows need tens of microseconds of host time per kernel gets it back even though
// the fit starts from megatron-core's (0 here): vTrain's single-node rows (every 10th of the
// fit's) generated with 80 us, the deepspeed stack's other factors away from megatron-core's.
TEST(StackFit, RecoversALargeHostTimeFromMegatronCoresZero) {
    Factors core;
    core.gemm = 0.85;
    core.hbm = 0.95;
    core.collective = 0.58;
    core.kernel_launch_s = 0;
    Factors ds = core;
    ds.gemm = 0.8;
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

    const auto fitted = fit_all(items, "");
    const Factors& f = fitted.at("deepspeed");
    std::printf("  deepspeed fitted: gemm %.3f hbm %.3f collectives %.3f host %.1f us\n", f.gemm,
                f.hbm, f.collective, 1e6 * f.kernel_launch_s);
    EXPECT_NEAR(f.kernel_launch_s, ds.kernel_launch_s, 0.05 * ds.kernel_launch_s);
    EXPECT_LT(errors(items, fitted).at("vtrain").s.mean_abs, 0.01);
}

}  // namespace
