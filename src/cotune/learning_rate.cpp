#include "src/cotune/learning_rate.hpp"

#include <algorithm>
#include <cmath>

#include "src/model/flops.hpp"

namespace prism::cotune {

double deepseek_lr_opt(double compute_flops) { return 0.3118 * std::pow(compute_flops, -0.1250); }

double deepseek_batch_opt_tokens(double compute_flops) {
    return 0.2920 * std::pow(compute_flops, 0.3271);
}

double deepseek_flops_per_token(const ModelSpec& model) {
    const double layers = model.layers;
    return 6.0 * layers * layer_params(model) +
           6.0 * layers * static_cast<double>(model.hidden) * model.seq;
}

namespace {

double table_lr(std::span<const std::pair<double, double>> table, double batch_tokens) {
    if (table.empty()) return 0.0;
    if (batch_tokens <= table.front().first) return table.front().second;
    if (batch_tokens >= table.back().first) return table.back().second;
    const auto hi = std::upper_bound(table.begin(), table.end(), batch_tokens,
                                     [](double b, const auto& row) { return b < row.first; });
    const auto lo = hi - 1;
    const double t = std::log(batch_tokens / lo->first) / std::log(hi->first / lo->first);
    return std::exp((1.0 - t) * std::log(lo->second) + t * std::log(hi->second));
}

}  // namespace

double lr_opt(const CotuneSpec& spec, double batch_tokens, double reference_batch_tokens,
              double compute_flops) {
    switch (spec.lr_rule) {
        case LrRule::none:
            return 0.0;
        case LrRule::fixed:
            return spec.lr_reference;
        case LrRule::linear:
            return spec.lr_reference * batch_tokens / reference_batch_tokens;
        case LrRule::sqrt:
            return spec.lr_reference * std::sqrt(batch_tokens / reference_batch_tokens);
        case LrRule::deepseek:
            // the rule's optimum (lr_opt, B_opt) at this budget, scaled to this batch
            return deepseek_lr_opt(compute_flops) *
                   std::pow(batch_tokens / deepseek_batch_opt_tokens(compute_flops),
                            spec.lr_batch_exponent);
        case LrRule::table:
            return table_lr(spec.lr_table, batch_tokens);
    }
    return 0.0;
}

double lr_penalty(const LrPenaltySpec& penalty, double learning_rate, double optimum) {
    if (!(learning_rate > 0) || !(optimum > 0)) return 1.0;
    const double distance = std::abs(std::log(learning_rate / optimum));
    switch (penalty.shape) {
        case LrPenaltyShape::none:
            return 1.0;
        case LrPenaltyShape::linear:
            return 1.0 + penalty.coefficient * distance;
        case LrPenaltyShape::quadratic:
            return 1.0 + penalty.coefficient * distance * distance;
    }
    return 1.0;
}

}  // namespace prism::cotune
