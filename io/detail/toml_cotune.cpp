#include "io/detail/toml_cotune.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/detail/toml_reader.hpp"
#include "src/cotune/cotune.hpp"

namespace prism::io::detail {

namespace {

const std::vector<std::string> kCotuneKeys{
    "target_loss",    "target_tokens",   "reference_batch_tokens",
    "noise",          "b_noise",         "kaplan",
    "lr_rule",        "lr_reference",    "lr_table",
    "compute_budget", "lr_penalty",      "warmup_steps",
    "batch_ramp",     "lr_batch_scaling"};

bool has_dimension(const Experiment& e, const char* name) {
    return std::any_of(e.space.dimensions.begin(), e.space.dimensions.end(),
                       [&](const Dimension& d) { return d.name == name; });
}

/// Step counts (warm-up, steps to target) must fit a double's 53 bits exactly, as the run's
/// total does (experiment_checks.cpp); tokens past 1e18 (~10^5 times the largest runs
/// published, 1.5e13 tokens) are a typo.
constexpr double kMaxSteps = 9007199254740992.0;  // 2^53
constexpr double kMaxTargetTokens = 1e18;
constexpr double kMaxPenaltyCoefficient = 100;

double positive(const toml::table& table, std::string_view key, double fallback) {
    const toml::node* node = table.get(key);
    return node == nullptr ? fallback : as_positive(*node, join_key("cotune", key));
}

void parse_kaplan(const toml::table& table, KaplanParams& k) {
    check_keys(table, "cotune.kaplan",
               {"b_star", "alpha_b", "n_c", "alpha_n", "s_c", "alpha_s", "parameters"});
    auto read = [&](const char* key, double& value) {
        if (const toml::node* n = table.get(key)) {
            value = as_positive(*n, join_key("cotune.kaplan", key));
        }
    };
    read("b_star", k.b_star_tokens);
    read("alpha_b", k.alpha_b);
    read("n_c", k.n_c);
    read("alpha_n", k.alpha_n);
    read("s_c", k.s_c);
    read("alpha_s", k.alpha_s);
    read("parameters", k.parameters);
}

void parse_learning_rate(const toml::table& table, bool lr_in_space, CotuneSpec& spec) {
    const toml::node* rule = table.get("lr_rule");
    const std::string name =
        rule == nullptr ? "none"
                        : as_choice(*rule, "cotune.lr_rule",
                                    {"none", "fixed", "linear", "sqrt", "deepseek", "table"});
    spec.lr_rule = name == "fixed"      ? LrRule::fixed
                   : name == "linear"   ? LrRule::linear
                   : name == "sqrt"     ? LrRule::sqrt
                   : name == "deepseek" ? LrRule::deepseek
                   : name == "table"    ? LrRule::table
                                        : LrRule::none;
    if (spec.lr_rule == LrRule::none && lr_in_space) {
        throw error_at(rule != nullptr ? rule->source() : table.source(),
                       "cotune.lr_rule: the space lists learning_rate values; name the rule "
                       "that gives their optimum (\"fixed\", \"linear\", \"sqrt\", \"deepseek\", "
                       "\"table\")");
    }
    const bool wants_reference = spec.lr_rule == LrRule::fixed || spec.lr_rule == LrRule::linear ||
                                 spec.lr_rule == LrRule::sqrt;
    const toml::node* reference = table.get("lr_reference");
    if (wants_reference && reference == nullptr) {
        throw error_at(rule->source(), fmt::format("cotune.lr_rule: \"{}\" needs lr_reference "
                                                   "(the optimal learning rate at "
                                                   "reference_batch_tokens)",
                                                   name));
    }
    if (reference != nullptr) {
        if (!wants_reference) {
            fail_at(*reference,
                    fmt::format("cotune.lr_reference: not used by lr_rule = \"{}\"", name));
        }
        spec.lr_reference = as_positive(*reference, "cotune.lr_reference");
    }
    if (const toml::node* scaling = table.get("lr_batch_scaling")) {
        if (spec.lr_rule != LrRule::deepseek) {
            fail_at(*scaling,
                    fmt::format("cotune.lr_batch_scaling: not used by lr_rule = \"{}\"", name));
        }
        const std::string how =
            as_choice(*scaling, "cotune.lr_batch_scaling", {"sqrt", "linear", "none"});
        spec.lr_batch_exponent = how == "sqrt" ? 0.5 : how == "linear" ? 1.0 : 0.0;
    }
    const toml::node* budget = table.get("compute_budget");
    if (budget != nullptr) {
        if (spec.lr_rule != LrRule::deepseek) {
            fail_at(*budget,
                    fmt::format("cotune.compute_budget: not used by lr_rule = \"{}\"", name));
        }
        spec.compute_budget_flops = as_positive(*budget, "cotune.compute_budget");
    }
    const toml::node* lr_table = table.get("lr_table");
    if ((spec.lr_rule == LrRule::table) != (lr_table != nullptr)) {
        if (lr_table != nullptr) {
            fail_at(*lr_table, fmt::format("cotune.lr_table: not used by lr_rule = \"{}\"", name));
        }
        throw error_at(rule->source(),
                       "cotune.lr_rule: \"table\" needs lr_table = [[batch_tokens, lr], ...]");
    }
    if (lr_table == nullptr) return;
    const toml::array& rows = as_array(*lr_table, "cotune.lr_table");
    if (rows.empty()) fail_at(rows, "cotune.lr_table: empty; give [batch_tokens, lr] pairs");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string key = fmt::format("cotune.lr_table[{}]", i);
        const toml::array& row = as_array(rows[i], key);
        if (row.size() != 2) {
            fail_at(row,
                    fmt::format("{}: expected [batch_tokens, lr], got {} values", key, row.size()));
        }
        const double batch = as_positive(row[0], key);
        const double lr = as_positive(row[1], key);
        if (!spec.lr_table.empty() && batch <= spec.lr_table.back().first) {
            fail_at(row[0],
                    fmt::format("{}: batch {} must be larger than the row before's ({})", key,
                                format_number(batch), format_number(spec.lr_table.back().first)));
        }
        spec.lr_table.emplace_back(batch, lr);
    }
}

void parse_penalty(const toml::node& node, LrPenaltySpec& penalty) {
    const toml::table& table = as_table(node, "cotune.lr_penalty");
    check_keys(table, "cotune.lr_penalty", {"shape", "coefficient"});
    if (const toml::node* n = table.get("shape")) {
        const std::string shape =
            as_choice(*n, "cotune.lr_penalty.shape", {"quadratic", "linear", "none"});
        penalty.shape = shape == "quadratic" ? LrPenaltyShape::quadratic
                        : shape == "linear"  ? LrPenaltyShape::linear
                                             : LrPenaltyShape::none;
    }
    if (const toml::node* n = table.get("coefficient")) {
        penalty.coefficient = as_positive(*n, "cotune.lr_penalty.coefficient", true);
        // at 100, a learning rate off by a factor of 2 already costs 49x the steps (quadratic)
        if (penalty.coefficient > kMaxPenaltyCoefficient) {
            fail_at(*n, fmt::format("cotune.lr_penalty.coefficient: {} is above the limit of {} "
                                    "(at 100 a learning rate off by 2x costs 49x the steps)",
                                    format_number(penalty.coefficient),
                                    format_number(kMaxPenaltyCoefficient)));
        }
    }
}

void parse_ramp(const toml::node& node, int seq, CotuneSpec& spec) {
    const toml::array& phases = as_array(node, "cotune.batch_ramp");
    for (std::size_t i = 0; i < phases.size(); ++i) {
        const std::string key = fmt::format("cotune.batch_ramp[{}]", i);
        const toml::table& t = as_table(phases[i], key);
        check_keys(t, key, {"batch_tokens", "until_tokens"});
        BatchRampPhase phase;
        for (const char* name : {"batch_tokens", "until_tokens"}) {
            const toml::node* n = t.get(name);
            if (n == nullptr)
                throw error_at(t.source(), fmt::format("{}: missing '{}'", key, name));
            (std::string_view(name) == "batch_tokens" ? phase.batch_tokens : phase.until_tokens) =
                as_positive(*n, join_key(key, name));
        }
        const toml::node& batch = *t.get("batch_tokens");
        if (phase.batch_tokens != std::floor(phase.batch_tokens) ||
            std::fmod(phase.batch_tokens, static_cast<double>(seq)) != 0) {
            fail_at(batch, fmt::format("{}.batch_tokens: {} is not a multiple of seq = {}", key,
                                       format_number(phase.batch_tokens), seq));
        }
        if (!spec.batch_ramp.empty()) {
            const BatchRampPhase& before = spec.batch_ramp.back();
            if (phase.batch_tokens <= before.batch_tokens) {
                fail_at(batch, fmt::format("{}.batch_tokens: {} must be larger than the phase "
                                           "before's ({})",
                                           key, format_number(phase.batch_tokens),
                                           format_number(before.batch_tokens)));
            }
            if (phase.until_tokens <= before.until_tokens) {
                fail_at(*t.get("until_tokens"),
                        fmt::format("{}.until_tokens: {} must be larger than the phase before's "
                                    "({})",
                                    key, format_number(phase.until_tokens),
                                    format_number(before.until_tokens)));
            }
        }
        spec.batch_ramp.push_back(phase);
    }
}

/// The node a "cotune.<key>: ..." message is about ("cotune.kaplan.n_c" -> [kaplan] n_c).
const toml::node* node_of_message(const toml::table& table, const std::string& message) {
    const std::string prefix = "cotune.";
    if (!message.starts_with(prefix)) return nullptr;
    const std::string key = message.substr(prefix.size(), message.find(':') - prefix.size());
    const toml::node* node = &table;
    std::size_t begin = 0;
    while (node != nullptr && begin <= key.size()) {
        const std::size_t dot = key.find('.', begin);
        const std::string part = key.substr(begin, dot == std::string::npos ? dot : dot - begin);
        const toml::table* t = node->as_table();
        node = t == nullptr ? nullptr : t->get(part);
        if (dot == std::string::npos) break;
        begin = dot + 1;
    }
    return node;
}

}  // namespace

void parse_cotune(const toml::table& table, Experiment& experiment) {
    check_keys(table, "cotune", kCotuneKeys);
    CotuneSpec& spec = experiment.cotune;
    spec.enabled = true;
    const toml::node* loss = table.get("target_loss");
    const toml::node* tokens = table.get("target_tokens");
    if (loss != nullptr && tokens != nullptr) {
        fail_at(*tokens,
                "cotune.target_tokens: give either target_loss or target_tokens, not both");
    }
    if (loss == nullptr && tokens == nullptr) {
        throw error_at(table.source(),
                       "cotune: missing 'target_loss' (a loss on the Kaplan loss path) or "
                       "'target_tokens' (tokens the reference batch needs)");
    }
    spec.target_loss = positive(table, "target_loss", 0);
    spec.target_tokens = positive(table, "target_tokens", 0);
    if (tokens != nullptr && spec.target_tokens > kMaxTargetTokens) {
        fail_at(*tokens,
                fmt::format("cotune.target_tokens: {} is above the limit of {} tokens "
                            "(10^5 times the largest published runs)",
                            format_number(spec.target_tokens), format_number(kMaxTargetTokens)));
    }
    spec.reference_batch_tokens = positive(table, "reference_batch_tokens", 0);
    if (const toml::node* n = table.get("noise")) {
        spec.noise = as_choice(*n, "cotune.noise", {"constant", "kaplan"}) == "kaplan"
                         ? NoiseModel::kaplan
                         : NoiseModel::constant;
    }
    const bool b_noise_dimension =
        has_dimension(experiment, "b_noise") || experiment.defaults.b_noise_tokens > 0;
    if (const toml::node* n = table.get("b_noise")) {
        if (spec.noise == NoiseModel::kaplan) {
            fail_at(*n, "cotune.b_noise: not used with noise = \"kaplan\" (B_crit(L) sets it)");
        }
        spec.b_noise_tokens = as_positive(*n, "cotune.b_noise");
    } else if (spec.noise == NoiseModel::constant && !b_noise_dimension) {
        throw error_at(table.source(),
                       "cotune: missing 'b_noise' (tokens; noise = \"constant\" needs it here or "
                       "as a [space] b_noise list)");
    }
    if (const toml::node* n = table.get("kaplan"))
        parse_kaplan(as_table(*n, "cotune.kaplan"), spec.kaplan);
    parse_learning_rate(table, has_dimension(experiment, "learning_rate"), spec);
    if (const toml::node* n = table.get("lr_penalty")) parse_penalty(*n, spec.lr_penalty);
    spec.warmup_steps = 0;
    if (const toml::node* n = table.get("warmup_steps")) {
        spec.warmup_steps = as_positive(*n, "cotune.warmup_steps", true);
        if (spec.warmup_steps > kMaxSteps) {
            fail_at(*n, fmt::format("cotune.warmup_steps: {} is more than 2^53 steps (a step "
                                    "count must fit 64 bits exactly)",
                                    format_number(spec.warmup_steps)));
        }
    }
    if (const toml::node* n = table.get("batch_ramp")) parse_ramp(*n, experiment.model.seq, spec);

    // What only the whole model can check (a target loss below the model's asymptote, a
    // DeepSeek rule without a budget), located at the key the message names.
    try {
        cotune::make_model(experiment);
    } catch (const Error& e) {
        // ModelError too: a target the model cannot reach is bad input, located (issue 33)
        const toml::node* at = node_of_message(table, e.what());
        throw error_at(at != nullptr ? at->source() : table.source(), e.what());
    }
}

void check_b_noise_dimension(const toml::table& root, const Experiment& experiment) {
    if (!has_dimension(experiment, "b_noise") && !(experiment.defaults.b_noise_tokens > 0)) {
        return;
    }
    if (experiment.cotune.enabled && experiment.cotune.noise == NoiseModel::constant) return;
    const toml::node* at = root["space"]["b_noise"].node();
    if (at == nullptr) at = root["defaults"]["b_noise"].node();
    const std::string message =
        experiment.cotune.enabled
            ? "b_noise: a per-point B_noise needs [cotune] noise = \"constant\""
            : "b_noise: the gradient noise scale is used only by a [cotune] study; add one";
    if (at == nullptr) throw ConfigError(experiment.file, 0, 0, message);
    fail_at(*at, (root["space"]["b_noise"].node() != nullptr ? "space." : "defaults.") + message);
}

}  // namespace prism::io::detail
