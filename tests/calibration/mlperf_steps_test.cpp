// The model against measured step times of real runs (issue 26): MLPerf Training v4.1, NVIDIA,
// GPT-3 175B on 256 and 512 H100 (Eos) and 64 B200 (Nyx), 3 runs each (tests/data/steps), with
// the experiment files of configs/examples/mlperf. Nothing here is fitted to the rows it checks
// except where a test says "in sample".

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "io/experiment_loader.hpp"
#include "io/step_csv.hpp"
#include "io/variability_profile.hpp"
#include "src/fit/step_fit.hpp"
#include "src/model/design_space.hpp"
#include "src/model/deterministic.hpp"

namespace {

using namespace prism;
namespace fs = std::filesystem;

struct System {
    const char* experiment;  // configs/examples/mlperf/<name>.toml
    const char* runs;        // file name prefix in tests/data/steps
    const char* profile;     // the platform's fitted variability preset
};

const System kH100_256{"eos_h100_256", "mlperfv41_NVIDIA_eos_n32_", "mlperf-eos-h100"};
const System kH100_512{"eos_h100_512", "mlperfv41_NVIDIA_eos_n64_", "mlperf-eos-h100"};
const System kB200_64{"nyx_b200_64", "mlperfv41_NVIDIA_b200_n8_", "mlperf-nyx-b200"};

std::vector<fit::MeasuredSteps> runs_of(const System& s) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(fs::path(PRISM_TEST_DATA_DIR) / "steps")) {
        const std::string name = e.path().filename().string();
        if (name.rfind(s.runs, 0) == 0 && e.path().extension() == ".csv") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    std::vector<fit::MeasuredSteps> out;
    for (const fs::path& f : files) {
        out.push_back({f.filename().string(), io::read_step_csv(f).step_time_s});
    }
    return out;
}

fit::StepModelInput model_of(const System& s) {
    const Experiment e = io::load_experiment(std::string(PRISM_SOURCE_DIR) +
                                             "/configs/examples/mlperf/" + s.experiment + ".toml");
    const DesignPoint p = decode_point(e, {});
    const DeterministicResult det = evaluate_deterministic(e, p);
    fit::StepModelInput m;
    m.profile = det.profile;
    m.point = p;
    m.hardware = e.hardware.at(0);
    m.cluster = e.cluster;
    m.seed = e.seed;
    return m;
}

// Issue 26: "measured vs predicted step time (median within 5%)". The predicted median is the
// model's over clusters (the deterministic step, which the variability raises by 0.8-2.4%
// through the slowest GPU). The experiment files carry one constant of the MLPerf software
// stack, the FP8 GEMM efficiency, fitted on the 512-H100 runs' median (the test below redoes
// that fit): 512 H100 is in sample for the median, 256 H100 and 64 B200 are held out. Measured:
// +2.4% (256 H100), +0.8% (512 H100), +3.6% (64 B200); with the NeMo-recipe constants of the
// presets instead +7.4%, +5.7%, +9.0%.
TEST(MlperfSteps, PredictedMedianWithinFivePercentOfEachSystemsMeasuredMedian) {
    for (const System& s : {kH100_256, kH100_512, kB200_64}) {
        const fit::StepComparison c =
            fit::compare_steps(model_of(s), io::load_variability(s.profile), runs_of(s));
        const double err = c.model_marginal_p50_s / c.measured.p50_s - 1;
        std::printf(
            "  %-14s measured median %.3f s, predicted %.3f s (%+.1f%%), deterministic "
            "%.3f s (%+.1f%%)\n",
            s.experiment, c.measured.p50_s, c.model_marginal_p50_s, 100 * err, c.deterministic_s,
            100 * (c.deterministic_s / c.measured.p50_s - 1));
        EXPECT_LE(std::abs(err), 0.05) << s.experiment;
    }
}

// The MLPerf-stack constant in configs/examples/mlperf is what its comment says it is: the FP8
// GEMM efficiency at which the deterministic step of the 512-H100 configuration equals those
// runs' measured median (bisection here, independent of the file's value).
TEST(MlperfSteps, TheStackConstantIsTheFitOnThe512GpuRunsMedian) {
    const Experiment e = io::load_experiment(std::string(PRISM_SOURCE_DIR) +
                                             "/configs/examples/mlperf/eos_h100_512.toml");
    const DesignPoint p = decode_point(e, {});
    std::vector<double> steps;
    for (const fit::MeasuredSteps& run : runs_of(kH100_512)) {
        steps.insert(steps.end(), run.step_time_s.begin(), run.step_time_s.end());
    }
    std::sort(steps.begin(), steps.end());
    const double measured_median_s = steps[steps.size() / 2];
    Experiment trial = e;
    double lo = 0.5;
    double hi = 0.9;
    for (int i = 0; i < 40; ++i) {
        trial.hardware.at(0).gpu.fp8_gemm_max_efficiency = (lo + hi) / 2;
        const double step_s = evaluate_deterministic(trial, p).step_time_s;
        (step_s > measured_median_s ? lo : hi) = (lo + hi) / 2;
    }
    std::printf("  fitted FP8 GEMM efficiency %.5f (file %.4f), measured median %.4f s\n",
                (lo + hi) / 2, e.hardware.at(0).gpu.fp8_gemm_max_efficiency, measured_median_s);
    EXPECT_NEAR(e.hardware.at(0).gpu.fp8_gemm_max_efficiency, (lo + hi) / 2, 5e-4);
}

// "Measure a small job, predict the big one": the within-run shape fitted on the 256-GPU runs
// predicts the 512-GPU runs' with a KS distance below the PRISM paper's 0.208 against its own
// measurements (issue 26's bar: 0.2). Measured: 0.055 (the fit lands at the transient end of the
// ridge: regime cv 3e-5); in sample 0.023.
TEST(MlperfSteps, AProfileFittedOn256H100PredictsThe512H100ShapeWithinKs02) {
    VariabilitySpec base = io::load_variability("prism-paper");
    base.persistent.slow_probability = 0;
    fit::StepFitParameters start;
    start.regime_cv = base.comm_regime.cv;
    const fit::StepFit f = fit::fit_steps(model_of(kH100_256), base, runs_of(kH100_256),
                                          fit::StepFitTarget::both, start);

    const fit::StepComparison c = fit::compare_steps(
        model_of(kH100_512), fit::with_parameters(base, f.parameters), runs_of(kH100_512));

    std::printf(
        "  fitted on 256: transient scale %.3g, regime cv %.3g, spatial cv %.3g (KS "
        "%.3f); 512: KS shape %.3f, p99/p50 measured %.5f model %.5f\n",
        f.parameters.transient_scale, f.parameters.regime_cv, f.parameters.spatial_cv, f.ks_shape,
        c.ks_shape, c.measured.p99_over_p50, c.model.p99_over_p50);
    EXPECT_LT(f.ks_shape, 0.05);
    EXPECT_LT(c.ks_shape, 0.2);
}

// The PRISM-paper preset (production variability at up to 64k GPUs) against these dedicated
// benchmark runs: its within-run step cv is many times the measured one on every system
// (measured 19x, 9.4x and 16x on 256 H100, 512 H100 and 64 B200; 24x, 12x and 18x before FP8
// parameters and the stack's GEMM efficiency were modelled), its shape KS above 0.4.
TEST(MlperfSteps, ThePrismPaperPresetIsManyTimesTooWideForTheseRuns) {
    for (const System& s : {kH100_256, kH100_512, kB200_64}) {
        const fit::StepComparison c =
            fit::compare_steps(model_of(s), io::load_variability("prism-paper"), runs_of(s));

        std::printf("  %-14s step cv measured %.3g, prism-paper %.3g; p99/p50 %.4f vs %.4f\n",
                    s.experiment, c.measured.cv, c.model.cv, c.measured.p99_over_p50,
                    c.model.p99_over_p50);
        EXPECT_GT(c.model.cv / c.measured.cv, 5) << s.experiment;
        EXPECT_GT(c.ks_shape, 0.4) << s.experiment;
    }
}

}  // namespace
