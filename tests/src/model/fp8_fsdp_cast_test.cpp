// torchao's Float8 weights under per-layer FSDP with fp8_params (enable_fsdp_float8_all_gather):
// the weight is cast on its shard before the gather, with a scale precomputed per step, and the
// backward's input-gradient GEMM copies the gathered FP8 weight column-major (layer_passes.hpp,
// fsdp_fp8_weights). Hand calculations of the bytes, at the small test GPU's 2 TB/s x 0.8.

#include <gtest/gtest.h>

#include "model_test_helpers.hpp"
#include "src/model/detail/layer_passes.hpp"

namespace {

using prism::DesignPoint;

constexpr double kBw = 2e12 * 0.8;  // the small experiment's HBM bandwidth x its efficiency
constexpr double kAmaxStage = 2e-6;

TEST(Fp8FsdpCast, WeightCastOnTheShardAndTransposedForTheBackward) {
    auto e = prism::test::small_experiment();
    e.training.precision = prism::Precision::fp8;
    e.training.fp8_params = true;
    e.hardware[0].fp8_cast = prism::Fp8Cast::separate;
    DesignPoint p;  // per-layer FSDP over 4 ranks
    p.dp = 4;
    p.zero_stage = 3;
    const prism::detail::Context c(e.model, e.training, e.hardware[0], p);
    const double input = 1024.0 * 1024, weight = 1024.0 * 4096, grad = 1024.0 * 4096;

    // forward: the input at torchao's 4 bytes per element with its amax stage; the weight read
    // (2) and written in FP8 (1) on its quarter, no amax stage of its own
    EXPECT_NEAR(prism::detail::fp8_cast_forward_s(c, input, weight),
                (4 * input + 3 * weight / 4) / kBw + kAmaxStage, 1e-15);
    // a weight-only call (op-level SAC's recomputed casts) costs the shard cast alone
    EXPECT_NEAR(prism::detail::fp8_cast_forward_s(c, 0, weight), 3 * weight / 4 / kBw, 1e-15);
    // backward: the output gradient as before, plus the column-major copy of the whole weight
    EXPECT_NEAR(prism::detail::fp8_cast_backward_s(c, grad, weight),
                (4 * grad + 2 * weight) / kBw + kAmaxStage, 1e-15);

    // without fp8_params, or without per-layer FSDP, torchao casts the full weight itself
    for (const bool fp8_params : {false, true}) {
        auto f = e;
        f.training.fp8_params = fp8_params;
        DesignPoint q = p;
        if (fp8_params) q.zero_stage = 1;
        const prism::detail::Context d(f.model, f.training, f.hardware[0], q);
        EXPECT_NEAR(prism::detail::fp8_cast_forward_s(d, input, weight),
                    (4 * input + 6 * weight) / kBw + 2 * kAmaxStage, 1e-15);
        EXPECT_NEAR(prism::detail::fp8_cast_backward_s(d, grad, weight),
                    4 * grad / kBw + kAmaxStage, 1e-15);
    }
}

}  // namespace
