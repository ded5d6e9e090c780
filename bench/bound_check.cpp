// Checks the pruning bounds (src/model/bounds.hpp) on every point of an experiment: each point
// is screened (deterministic row) and evaluated in full, and every metric with a bound is
// compared with it. Prints, per metric, the smallest value / bound (lower bounds) or bound /
// value (upper bounds) and the count of violations; exits 1 if any. Also checks that the
// screened row's deterministic metrics equal the full row's, bit for bit. A measurement, not a
// benchmark; tests/cli/bounds_test.sh runs it on the quickstart.
//
//   ./bound_check [experiment.toml = configs/quickstart.toml]

#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "explorer/design_space.hpp"
#include "io/experiment_loader.hpp"
#include "src/model/bounds.hpp"
#include "src/model/evaluate.hpp"

int main(int argc, char** argv) {
    using namespace prism;
    const std::string path =
        argc > 1 ? argv[1] : std::string(PRISM_SOURCE_DIR) + "/configs/quickstart.toml";
    try {
        const Experiment e = io::load_experiment(path);
        const explorer::DesignSpace space(e);
        const Evaluator evaluator(e);
        const MetricSchema& schema = evaluator.schema();
        struct Seen {
            BoundKind kind = BoundKind::none;
            double worst = HUGE_VAL;  // smallest margin ratio (>= 1 holds the bound)
            long checked = 0, violations = 0;
        };
        std::map<std::string, Seen> seen;
        long points = 0, evaluated = 0, mismatches = 0;
        for (std::uint64_t i = 0; i < space.size(); ++i) {
            const auto d = space.decode(i);
            if (d.filtered) continue;
            ++points;
            const std::uint64_t stream = space.stream_index(i);
            const PointResult s = evaluator.screen(d.point, i, stream);
            if (s.status != PointStatus::dominated) continue;
            const PointResult full = evaluator.evaluate(d.point, i, stream, nullptr);
            if (full.status != PointStatus::ok) continue;
            ++evaluated;
            for (std::size_t m = 0; m < schema.size(); ++m) {
                const std::string& name = schema[m].name;
                const BoundKind kind = metric_bound_kind(name);
                if (kind == BoundKind::none) continue;
                const double bound = metric_bound(schema, s.values, name);
                const double v = full.values[m];
                if (std::isnan(bound) || std::isnan(v)) continue;
                if (kind == BoundKind::exact) {
                    if (!(v == bound)) ++mismatches;
                    continue;
                }
                auto& x = seen[name];
                x.kind = kind;
                ++x.checked;
                const double margin = kind == BoundKind::lower ? v / bound : bound / v;
                x.worst = std::min(x.worst, margin);
                // rounding: the evaluators' arithmetic differs from the deterministic model's
                if (kind == BoundKind::lower ? v < bound * (1 - 1e-12) : v > bound * (1 + 1e-12)) {
                    ++x.violations;
                }
            }
        }
        std::printf(
            "%s: %ld points, %ld evaluated (ok); deterministic metrics differing from "
            "the screen: %ld\n",
            path.c_str(), points, evaluated, mismatches);
        std::printf("%-22s %6s %9s %12s %11s\n", "metric", "bound", "checked", "worst ratio",
                    "violations");
        long violations = 0;
        for (const auto& [name, x] : seen) {
            std::printf("%-22s %6s %9ld %12.6f %11ld\n", name.c_str(),
                        x.kind == BoundKind::lower ? ">=" : "<=", x.checked, x.worst, x.violations);
            violations += x.violations;
        }
        return violations == 0 && mismatches == 0 ? 0 : 1;
    } catch (const std::exception& ex) {
        std::fprintf(stderr, "bound_check: %s\n", ex.what());
        return 2;
    }
}
