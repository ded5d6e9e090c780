#include "explorer/fit_lr_command.hpp"

#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "explorer/cli.hpp"
#include "explorer/table.hpp"
#include "io/loss_curves.hpp"
#include "src/common/error.hpp"
#include "src/cotune/loss_fit.hpp"

namespace prism::explorer {

int fit_lr_command(const FitLrOptions& options, std::ostream& out, std::ostream& err) {
    if (!(options.tau_step > 0)) {
        throw ConfigError(fmt::format("fit-lr: --tau must be > 0 (got {})", options.tau_step));
    }
    const std::vector<io::LossCurve> curves = io::read_loss_curves(options.curves_path);
    std::vector<cotune::FitOutcome> outcomes;
    std::vector<std::vector<Cell>> rows;
    for (const io::LossCurve& curve : curves) {
        if (options.tau_step < curve.steps.front()) {
            err << fmt::format(
                "prism: warning: {}: learning_rate {}: --tau {} is before the first measured "
                "step {}: its prediction extrapolates backwards\n",
                options.curves_path, curve.learning_rate, format_number(options.tau_step, 6),
                format_number(curve.steps.front(), 6));
        }
        outcomes.push_back(cotune::fit_exponential(curve.steps, curve.losses));
        const cotune::FitOutcome& o = outcomes.back();
        if (!o.fit) {
            err << fmt::format("prism: warning: {}: learning_rate {}: {}; curve rejected\n",
                               options.curves_path, curve.learning_rate, o.rejected);
            rows.push_back({curve.learning_rate, curve.steps.size(), Cell(), Cell(), Cell(), Cell(),
                            Cell(), Cell(), Cell(), Cell(), "rejected: loss does not decrease"});
            continue;
        }
        const cotune::ExponentialFit& f = *o.fit;
        std::string note;
        if (f.decay_seen < 0.5) note = "plateau c extrapolated";
        if (f.rate_at_bound) note += std::string(note.empty() ? "" : "; ") + "rate at search bound";
        rows.push_back({curve.learning_rate, f.points, f.a, f.b, f.c, f.predict(options.tau_step),
                        f.rmse, f.r_squared, f.downweighted, f.decay_seen, note});
    }
    out << fmt::format("{}: {} curves; y = a exp(b (step - first step)) + c, robust (Huber IRLS)\n",
                       options.curves_path, curves.size());
    out << format_table(
        {{"learning_rate", "", Align::right, 4},
         {"points", "", Align::right, 4},
         {"a", "", Align::right, 4},
         {"b", "1/step", Align::right, 4},
         {"c", "", Align::right, 5},
         {fmt::format("loss@{}", format_number(options.tau_step, 6)), "", Align::right, 5},
         {"rmse", "", Align::right, 3},
         {"r2", "", Align::right, 4},
         {"downweighted", "", Align::right, 4},
         {"decay_seen", "", Align::right, 3},
         {"note", "", Align::left, 4}},
        rows);
    const auto best = cotune::best_learning_rate(outcomes, options.tau_step);
    if (!best) {
        throw ConfigError(fmt::format("{}: every curve was rejected; no learning rate to choose",
                                      options.curves_path));
    }
    out << fmt::format("best learning_rate {} (predicted loss {} at step {})\n",
                       format_number(curves[*best].learning_rate, 6),
                       format_number(outcomes[*best].fit->predict(options.tau_step), 6),
                       format_number(options.tau_step, 6));
    return kExitOk;
}

}  // namespace prism::explorer
