// The analytic evaluator over the 26 points of the 405B-class sweep (bench/points_405b.hpp),
// `rounds` times, as BM_Analytic405BSweep runs it but with a fixed amount of work: a driver for
// instruction counts (valgrind --tool=callgrind), which unlike timings are repeatable on a
// loaded machine.
//   valgrind --tool=callgrind ./analytic_sweep [rounds = 4] [ordered | random | aware]

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/points_405b.hpp"

int main(int argc, char** argv) {
    using namespace prism;
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 4;
    PlacementKind kind = PlacementKind::ordered;
    if (argc > 2 && std::strcmp(argv[2], "random") == 0) kind = PlacementKind::random;
    if (argc > 2 && std::strcmp(argv[2], "aware") == 0) kind = PlacementKind::variability_aware;
    const bench::Sweep405B sweep;
    const auto v = bench::prism_paper(false);
    const EvaluationSpec eval;
    double sum = 0;
    std::uint64_t index = 0;
    for (int k = 0; k < rounds; ++k) {
        for (size_t i = 0; i < sweep.points.size(); ++i) {
            DesignPoint pt = sweep.points[i];
            pt.placement.kind = kind;
            const auto d =
                step_distribution(sweep.profiles[i], pt, sweep.base.experiment.hardware[0],
                                  sweep.base.experiment.cluster, v, eval, 2026, index++);
            sum += d.p99_s;
        }
    }
    std::printf("%llu points, sum of p99 %.17g\n", static_cast<unsigned long long>(index), sum);
}
