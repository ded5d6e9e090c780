#include "tools/calibration/scaling_gap.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

using prism::calibration::scaling_gap;
using prism::calibration::ScalingPoint;

TEST(ScalingGap, RecoversTheSlopeUnderEachGroupsOwnLevel) {
    // two groups at levels -0.10 and +0.05, both growing by 3% per doubling (log slope
    // log(1.03)), one group with a single GPU count (no slope: dropped)
    const double b = std::log(1.03);
    std::vector<ScalingPoint> pts;
    for (int g : {128, 256, 512}) pts.push_back({"a", g, -0.10 + b * std::log2(g)});
    for (int g : {8, 64}) pts.push_back({"b", g, 0.05 + b * std::log2(g)});
    pts.push_back({"c", 32, 0.4});

    const auto gap = scaling_gap(pts);

    EXPECT_EQ(gap.groups, 2);
    EXPECT_EQ(gap.rows, 5);
    EXPECT_EQ(gap.min_gpus, 8);
    EXPECT_EQ(gap.max_gpus, 512);
    EXPECT_NEAR(gap.per_doubling(), 0.03, 1e-12);
    EXPECT_NEAR(gap.slope_se, 0, 1e-12);  // exact data: no residual
}

TEST(ScalingGap, SlopeAndErrorMatchTheHandCalculation) {
    // one group, x = log2 GPUs = 1, 2, 3, y = 0, 0.03, 0.03: x - 2 = -1, 0, 1, y - 0.02 =
    // -0.02, 0.01, 0.01; slope = (0.02 + 0.01) / 2 = 0.015; residuals -0.005, 0.01, -0.005:
    // ssr = 1.5e-4 over 3 - 1 - 1 = 1 dof, se = sqrt(1.5e-4 / 2)
    const std::vector<ScalingPoint> pts = {{"a", 2, 0.0}, {"a", 4, 0.03}, {"a", 8, 0.03}};

    const auto gap = scaling_gap(pts);

    EXPECT_NEAR(gap.slope, 0.015, 1e-15);
    EXPECT_NEAR(gap.slope_se, std::sqrt(1.5e-4 / 2), 1e-15);
}

TEST(ScalingGap, NoGroupWithTwoGpuCountsHasNoSlope) {
    const auto gap = scaling_gap({{"a", 8, 0.1}, {"b", 16, 0.2}});

    EXPECT_EQ(gap.groups, 0);
    EXPECT_EQ(gap.rows, 0);
    EXPECT_EQ(gap.slope, 0);
}

}  // namespace
