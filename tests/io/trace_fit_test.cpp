// prism trace fit's pipeline (read -> jobs -> fit) on synthetic traces whose kernels have known
// lognormal spreads, rank factors and per-step regimes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "io/trace_reader.hpp"
#include "src/fit/trace_fit.hpp"
#include "tests/io/synthetic_trace.hpp"

namespace prism::io {
namespace {

using testing::SyntheticKernel;
using testing::SyntheticTrace;

std::string scratch(const std::string& name) {
    return testing::scratch_path("prism_trace_fit_test", name);
}

std::vector<KinetoTrace> read_all(const std::vector<SyntheticTrace>& specs) {
    std::vector<KinetoTrace> out;
    for (const SyntheticTrace& s : specs) {
        const std::string path = scratch(fmt::format("rank{}_seed{}.json.gz", s.rank, s.seed));
        testing::write_gzip(path, testing::synthetic_trace_json(s));
        out.push_back(read_kineto_trace(path));
    }
    return out;
}

const fit::ClassFit& class_fit(const fit::TraceFit& f, KernelClass c) {
    for (const fit::ClassFit& cf : f.classes) {
        if (cf.cls == c) return cf;
    }
    throw std::runtime_error("class not fitted");
}

// The cv of a set of log factors (sample variance, n - 1): what an estimator of a factor's
// spread can at best recover from these levels.
double sample_cv(const std::vector<double>& factors) {
    double mean = 0;
    for (double f : factors) mean += std::log(f);
    mean /= static_cast<double>(factors.size());
    double var = 0;
    for (double f : factors) var += (std::log(f) - mean) * (std::log(f) - mean);
    return std::sqrt(std::expm1(var / static_cast<double>(factors.size() - 1)));
}

// One rank, 10 steps; 150 GEMM shapes (lognormal cv 0.05, 50-3,800 us) and 60 elementwise
// kernels (cv 0.12): 1,500 and 600 invocations, 1,350 and 540 degrees of freedom. The fits
// are time-weighted, so the effective count is lower (~700 and ~280 for these base spreads):
// relative standard error of the cv ~2.7% and ~4.2%; the 12% tolerance is about 4 and 3 of them.
TEST(TraceFit, RecoversTheCvOfKnownLognormalKernels) {
    SyntheticTrace t;
    t.steps = 10;
    t.kernels = {{"sm90_xmma_gemm_bf16bf16_bf16f32", 50, 0.05, 150, ""},
                 {"void at::native::vectorized_elementwise_kernel<4>", 30, 0.12, 60, ""}};

    const fit::TraceFit f = fit::fit_traces(traced_jobs(read_all({t})));

    const fit::ClassFit& gemm = class_fit(f, KernelClass::gemm);
    const fit::ClassFit& elementwise = class_fit(f, KernelClass::elementwise);
    EXPECT_EQ(gemm.fit.samples, 1500u);
    EXPECT_NEAR(gemm.fit.families[1].cv / 0.05, 1.0, 0.12);
    EXPECT_NEAR(elementwise.fit.families[1].cv / 0.12, 1.0, 0.12);
    EXPECT_NEAR(gemm.fit.best.cv / 0.05, 1.0, 0.12);
    EXPECT_LT(gemm.fit.families[1].ks, gemm.fit.ks_critical_5pct);
    EXPECT_FALSE(f.spatial.has_value());  // one rank
}

TEST(TraceFit, RecoversTheSpreadOfRankFactorsAcrossTheRanksOfAJob) {
    std::mt19937_64 rng(5);
    std::lognormal_distribution<double> spread(0, 0.03);
    std::vector<SyntheticTrace> ranks;
    std::vector<double> factors;
    for (int r = 0; r < 8; ++r) {
        SyntheticTrace t;
        t.rank = r;
        t.world_size = 8;
        t.steps = 4;
        t.seed = 100 + static_cast<std::uint64_t>(r);
        t.rank_factor = spread(rng);
        t.kernels = {{"sm90_xmma_gemm_bf16bf16_bf16f32", 200, 0.02, 100, ""}};
        factors.push_back(t.rank_factor);
        ranks.push_back(t);
    }

    const fit::TraceFit f = fit::fit_traces(traced_jobs(read_all(ranks)));

    // Truth: the spread of the 8 factors drawn (the estimator sees only these); each rank's
    // effect rests on 400 invocations of cv 0.02, a noise of 0.001 on the log scale against
    // a spread of ~0.03.
    ASSERT_TRUE(f.spatial.has_value());
    EXPECT_EQ(f.spatial->levels, 8);
    EXPECT_NEAR(f.spatial->cv / sample_cv(factors), 1.0, 0.05);
}

TEST(TraceFit, SeparatesThePerStepRegimeFromTheCollectivesOwnSpread) {
    std::mt19937_64 rng(9);
    std::lognormal_distribution<double> regime(0, 0.15);
    SyntheticTrace t;
    t.steps = 16;
    t.seed = 3;
    for (int s = 0; s < t.steps; ++s) t.step_regime.push_back(regime(rng));
    t.kernels = {{"sm90_xmma_gemm_bf16bf16_bf16f32", 400, 0.02, 20, ""},
                 {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 300, 0.05, 40, "all_reduce"}};

    const fit::TraceFit f = fit::fit_traces(traced_jobs(read_all({t})));

    // Truth: the 16 step factors drawn; each step's effect rests on 40 collectives of cv 0.05
    // (noise 0.008 on the log scale against 0.15). The collectives' own cv is fitted after
    // dividing by the fitted regime: 600 degrees of freedom, 15% tolerance.
    ASSERT_TRUE(f.regime.has_value());
    EXPECT_EQ(f.regime->levels, 16);
    EXPECT_NEAR(f.regime->cv / sample_cv(t.step_regime), 1.0, 0.05);
    EXPECT_NEAR(class_fit(f, KernelClass::allreduce).fit.families[1].cv / 0.05, 1.0, 0.15);
    EXPECT_NEAR(class_fit(f, KernelClass::gemm).fit.families[1].cv / 0.02, 1.0, 0.15);
}

TEST(TraceFit, LeavesOutKernelsBelowTheMinimumDuration) {
    SyntheticTrace t;
    t.kernels = {{"void at::native::vectorized_elementwise_kernel<4>", 5, 0.3, 3, ""},
                 {"sm90_xmma_gemm_bf16bf16_bf16f32", 100, 0.02, 10, ""}};

    const fit::TraceFit f = fit::fit_traces(traced_jobs(read_all({t})));

    ASSERT_EQ(f.classes.size(), 1u);  // the elementwise kernels (5-10 us) are below 20 us
    EXPECT_EQ(f.classes[0].cls, KernelClass::gemm);
}

}  // namespace
}  // namespace prism::io
