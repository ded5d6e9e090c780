#include "src/model/design_space.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "src/common/error.hpp"
#include "src/model/pipeline_split.hpp"

namespace prism {

namespace {

using Type = DimensionValue::Type;

const char* type_name(Type t) {
    switch (t) {
        case Type::integer:
            return "an integer";
        case Type::number:
            return "a number";
        case Type::string:
            return "a string";
        case Type::boolean:
            return "a boolean";
    }
    return "a value";
}

std::string value_text(const DimensionValue& v) {
    switch (v.type) {
        case Type::integer:
            return std::to_string(v.i);
        case Type::number: {
            std::ostringstream out;
            out << v.d;
            return out.str();
        }
        case Type::string:
            return "\"" + v.s + "\"";
        case Type::boolean:
            return v.b ? "true" : "false";
    }
    return "?";
}

std::int64_t need_int(const Dimension& dim, const DimensionValue& v, std::int64_t min_value) {
    if (v.type != Type::integer) {
        throw ConfigError(dim.name + ": expected an integer, got " + type_name(v.type));
    }
    if (v.i < min_value) {
        throw ConfigError(dim.name + ": value " + std::to_string(v.i) +
                          " must be >= " + std::to_string(min_value));
    }
    return v.i;
}

int need_small_int(const Dimension& dim, const DimensionValue& v, std::int64_t min_value) {
    const std::int64_t x = need_int(dim, v, min_value);
    if (x > (std::int64_t{1} << 30)) {
        throw ConfigError(dim.name + ": value " + std::to_string(x) + " is too large");
    }
    return static_cast<int>(x);
}

double need_number(const Dimension& dim, const DimensionValue& v, bool positive) {
    double x = 0;
    if (v.type == Type::number) {
        x = v.d;
    } else if (v.type == Type::integer) {
        x = static_cast<double>(v.i);
    } else {
        throw ConfigError(dim.name + ": expected a number, got " + type_name(v.type));
    }
    if (!std::isfinite(x) || (positive ? x <= 0 : x < 0)) {
        throw ConfigError(dim.name + ": value " + value_text(v) + " must be " +
                          (positive ? "> 0" : ">= 0"));
    }
    return x;
}

const std::string& need_string(const Dimension& dim, const DimensionValue& v) {
    if (v.type != Type::string) {
        throw ConfigError(dim.name + ": expected a string, got " + type_name(v.type));
    }
    return v.s;
}

const char* dim_name(ParallelDim d) {
    switch (d) {
        case ParallelDim::tp:
            return "tp";
        case ParallelDim::cp:
            return "cp";
        case ParallelDim::pp:
            return "pp";
        case ParallelDim::dp:
            return "dp";
    }
    return "?";
}

}  // namespace

const std::vector<DimensionInfo>& design_dimensions() {
    static const std::vector<DimensionInfo> dims{
        {"tp", Type::integer, "tensor-parallel degree t"},
        {"pp", Type::integer, "pipeline-parallel degree p"},
        {"dp", Type::integer, "data-parallel degree d (exclusive with gpus)"},
        {"gpus", Type::integer, "total GPUs N; dp = N / (tp pp cp) (exclusive with dp)"},
        {"cp", Type::integer, "context-parallel degree c"},
        {"microbatch", Type::integer, "sequences per microbatch b"},
        {"zero_stage", Type::integer, "ZeRO stage 0..3 (3 = FSDP)"},
        {"recompute", Type::string, "activation recomputation: \"none\", \"selective\", \"full\""},
        {"sequence_parallel", Type::boolean, "Megatron sequence parallelism with TP"},
        {"interleave", Type::integer, "virtual pipeline stages per rank v (interleaved 1F1B)"},
        {"hardware", Type::string, "name of a [hardware.<name>] table"},
        {"placement", Type::string,
         "rank placement: an order such as \"tp-cp-pp-dp\" (innermost first), \"random\" or "
         "\"aware\""},
        {"global_batch", Type::integer, "global batch in sequences"},
        {"checkpoint_interval", Type::number, "checkpoint interval in seconds (or \"30 min\")"},
        {"learning_rate", Type::number, "peak learning rate"},
        {"b_noise", Type::number, "gradient noise scale B_noise in tokens ([cotune])"},
        {"ep", Type::integer, "expert-parallel degree (MoE; folded onto the tp cp dp ranks)"},
        {"etp", Type::integer, "expert tensor-parallel degree (MoE; default 1)"},
    };
    return dims;
}

const DimensionInfo* find_dimension(const std::string& name) {
    for (const auto& d : design_dimensions()) {
        if (d.name == name) return &d;
    }
    return nullptr;
}

Placement parse_placement(const std::string& text) {
    Placement p;
    if (text == "random") {
        p.kind = PlacementKind::random;
        return p;
    }
    if (text == "aware" || text == "variability-aware" || text == "variability_aware") {
        p.kind = PlacementKind::variability_aware;
        return p;
    }
    std::array<bool, 4> seen{};
    std::size_t pos = 0;
    int n = 0;
    while (pos <= text.size()) {
        const std::size_t dash = text.find('-', pos);
        const std::string part =
            text.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
        ParallelDim d{};
        if (part == "tp") {
            d = ParallelDim::tp;
        } else if (part == "cp") {
            d = ParallelDim::cp;
        } else if (part == "pp") {
            d = ParallelDim::pp;
        } else if (part == "dp") {
            d = ParallelDim::dp;
        } else {
            n = -1;
            break;
        }
        const int k = static_cast<int>(d);
        if (seen[k] || n >= 4) {
            n = -1;
            break;
        }
        seen[k] = true;
        p.order[n++] = d;
        if (dash == std::string::npos) break;
        pos = dash + 1;
    }
    if (n != 4) {
        // "ordered" is what the docs call the placement of an order: name the default one
        const std::string hint = text == "ordered" || text == "default"
                                     ? "; the default order, ranks in order, is \"tp-cp-pp-dp\""
                                     : "";
        throw ConfigError("placement: \"" + text +
                          "\" is not a placement (an order of tp, cp, pp, dp innermost first such "
                          "as \"tp-cp-pp-dp\", or \"random\", or \"aware\")" +
                          hint);
    }
    return p;
}

std::string placement_name(const Placement& placement) {
    switch (placement.kind) {
        case PlacementKind::random:
            return "random";
        case PlacementKind::variability_aware:
            return "aware";
        case PlacementKind::ordered:
            break;
    }
    std::string out;
    for (ParallelDim d : placement.order) {
        if (!out.empty()) out += "-";
        out += dim_name(d);
    }
    return out;
}

std::string recompute_name(Recompute r) {
    switch (r) {
        case Recompute::none:
            return "none";
        case Recompute::selective:
            return "selective";
        case Recompute::full:
            return "full";
    }
    return "?";
}

void apply_dimension(const Experiment& experiment, const Dimension& dim, std::size_t value_index,
                     DesignPoint& point) {
    if (value_index >= dim.values.size()) {
        throw ConfigError(dim.name + ": value index out of range");
    }
    const DimensionValue& v = dim.values[value_index];
    const std::string& n = dim.name;
    if (n == "tp") {
        point.tp = need_small_int(dim, v, 1);
    } else if (n == "pp") {
        point.pp = need_small_int(dim, v, 1);
    } else if (n == "dp") {
        point.dp = need_small_int(dim, v, 1);
    } else if (n == "gpus") {
        // Stored in dp until decode_point divides it by tp pp cp (order of dimensions is free).
        point.dp = need_small_int(dim, v, 1);
    } else if (n == "cp") {
        point.cp = need_small_int(dim, v, 1);
    } else if (n == "microbatch") {
        point.microbatch = need_small_int(dim, v, 1);
    } else if (n == "zero_stage") {
        const int z = need_small_int(dim, v, 0);
        if (z > 3) throw ConfigError(n + ": value " + std::to_string(z) + " must be 0, 1, 2 or 3");
        point.zero_stage = z;
    } else if (n == "recompute") {
        const std::string& s = need_string(dim, v);
        if (s == "none") {
            point.recompute = Recompute::none;
        } else if (s == "selective") {
            point.recompute = Recompute::selective;
        } else if (s == "full") {
            point.recompute = Recompute::full;
        } else {
            throw ConfigError(n + ": \"" + s +
                              "\" is not one of \"none\", \"selective\", \"full\"");
        }
    } else if (n == "sequence_parallel") {
        if (v.type != Type::boolean) {
            throw ConfigError(n + ": expected a boolean, got " + type_name(v.type));
        }
        point.sequence_parallel = v.b;
    } else if (n == "interleave") {
        point.interleave = need_small_int(dim, v, 1);
    } else if (n == "hardware") {
        const std::string& s = need_string(dim, v);
        const auto it = std::find_if(experiment.hardware.begin(), experiment.hardware.end(),
                                     [&](const HardwareSpec& h) { return h.name == s; });
        if (it == experiment.hardware.end()) {
            std::string names;
            for (const auto& h : experiment.hardware) names += (names.empty() ? "" : ", ") + h.name;
            throw ConfigError(n + ": \"" + s + "\" is not a [hardware.<name>] table (have: " +
                              (names.empty() ? std::string("none") : names) + ")");
        }
        point.hardware = static_cast<int>(it - experiment.hardware.begin());
    } else if (n == "placement") {
        point.placement = parse_placement(need_string(dim, v));
    } else if (n == "global_batch") {
        point.global_batch_seqs = need_int(dim, v, 1);
    } else if (n == "checkpoint_interval") {
        point.checkpoint_interval_s = need_number(dim, v, true);
    } else if (n == "learning_rate") {
        point.learning_rate = need_number(dim, v, true);
    } else if (n == "b_noise") {
        point.b_noise_tokens = need_number(dim, v, true);
    } else if (n == "ep") {
        point.ep = need_small_int(dim, v, 1);
    } else if (n == "etp") {
        point.etp = need_small_int(dim, v, 1);
    } else {
        throw ConfigError("unknown design dimension '" + n + "'");
    }
}

DesignPoint decode_point(const Experiment& experiment, const std::vector<std::size_t>& digits,
                         bool* gpus_not_divisible) {
    DesignPoint point = experiment.defaults;
    std::int64_t gpus = 0;
    const auto& dims = experiment.space.dimensions;
    for (std::size_t k = 0; k < dims.size(); ++k) {
        apply_dimension(experiment, dims[k], digits[k], point);
        if (dims[k].name == "gpus") gpus = point.dp;
    }
    if (gpus_not_divisible) *gpus_not_divisible = false;
    if (gpus > 0) {
        const std::int64_t inner = std::int64_t{point.tp} * point.pp * point.cp;
        if (gpus % inner != 0) {
            if (gpus_not_divisible) *gpus_not_divisible = true;
            point.dp = 1;
        } else {
            point.dp = static_cast<int>(gpus / inner);
        }
    }
    resolve_point_defaults(experiment, point);
    return point;
}

void resolve_point_defaults(const Experiment& experiment, DesignPoint& point) {
    if (experiment.sequence_parallel_follows_tp) point.sequence_parallel = point.tp > 1;
}

std::optional<std::string> expert_parallel_problem(const ModelSpec& m, const DesignPoint& p) {
    if (!m.is_moe()) {
        if (p.ep > 1) return "ep needs an MoE model";
        if (p.etp > 1) return "etp needs an MoE model";
        return std::nullopt;
    }
    if (m.experts % p.ep != 0) return "ep does not divide experts";
    if (m.expert_ffn % p.etp != 0) return "etp does not divide expert_ffn";
    if ((std::int64_t{m.shared_experts} * m.expert_ffn) % p.tp != 0) {
        return "tp does not divide the shared experts' ffn";
    }
    if (p.edp() == 0) return "etp * ep does not divide tp * cp * dp";
    if (p.tp > 1 && !p.sequence_parallel) return "MoE with tp > 1 needs sequence_parallel";
    if (p.zero_stage >= 3) return "zero_stage 3 is not modelled for MoE";
    return std::nullopt;
}

std::optional<std::string> filter_reason(const Experiment& e, const DesignPoint& p) {
    const ModelSpec& m = e.model;
    if (m.heads % p.tp != 0) return "tp does not divide heads";
    if (m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0) {
        return "tp and kv_heads do not divide one another";
    }
    if (m.ffn % p.tp != 0 && m.moe_layers() < m.layers) return "tp does not divide ffn";
    if (auto problem = expert_parallel_problem(m, p)) return problem;
    if (p.interleave > 1 && p.pp == 1) return "interleave needs pp > 1";
    // DeepSpeed's pipeline engine (blocking_p2p): plain 1F1B (TrainSchedule), and it asserts
    // "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" (runtime/pipe/engine.py)
    if (e.training.blocking_p2p && p.interleave > 1) {
        return "DeepSpeed's pipeline (blocking_p2p) has no interleaved schedule";
    }
    if (e.training.blocking_p2p && p.pp > 1 && p.zero_stage >= 2) {
        return "DeepSpeed's pipeline (blocking_p2p) takes ZeRO stage 0-1";
    }
    if (auto problem = stage_split_problem(m, e.training, p.pp, p.interleave)) return problem;
    if (m.seq % p.cp != 0) return "cp does not divide seq";
    if (p.cp > 1 && (m.seq / p.cp) % 2 != 0) return "cp needs an even sequence chunk";
    if (p.sequence_parallel && p.tp == 1) return "sequence_parallel needs tp > 1";
    const std::int64_t batch =
        p.global_batch_seqs > 0 ? p.global_batch_seqs : e.training.global_batch_seqs;
    if (batch % (std::int64_t{p.dp} * p.microbatch) != 0) {
        return "global_batch is not a multiple of dp * microbatch";
    }
    const std::int64_t microbatches = batch / (std::int64_t{p.dp} * p.microbatch);
    if (p.interleave > 1 && microbatches % p.pp != 0) {
        return "interleaved schedule needs microbatches to be a multiple of pp";
    }
    const std::int64_t n = p.gpus();
    const Constraints& c = e.constraints;
    if (c.min_gpus > 0 && n < c.min_gpus) return "fewer gpus than constraints.min_gpus";
    if (c.max_gpus > 0 && n > c.max_gpus) return "more gpus than constraints.max_gpus";
    if (!c.gpus_in.empty() && std::find(c.gpus_in.begin(), c.gpus_in.end(), n) == c.gpus_in.end()) {
        return "gpus not in constraints.gpus_in";
    }
    if (e.cluster.total_gpus > 0 && n > e.cluster.total_gpus) {
        return "more gpus than cluster.total_gpus";
    }
    return std::nullopt;
}

std::string describe_point(const Experiment& experiment, const DesignPoint& p) {
    std::ostringstream out;
    out << "tp=" << p.tp << " pp=" << p.pp << " dp=" << p.dp;
    if (p.cp > 1) out << " cp=" << p.cp;
    if (p.ep > 1) out << " ep=" << p.ep;
    if (p.etp > 1) out << " etp=" << p.etp;
    out << " mb=" << p.microbatch;
    if (p.zero_stage > 0) out << " zero=" << p.zero_stage;
    out << " recompute=" << recompute_name(p.recompute);
    if (p.sequence_parallel) out << " sp";
    if (p.interleave > 1) out << " v=" << p.interleave;
    if (experiment.hardware.size() > 1) out << " hw=" << experiment.hardware[p.hardware].name;
    if (p.placement.kind != PlacementKind::ordered ||
        placement_name(p.placement) != "tp-cp-pp-dp") {
        out << " placement=" << placement_name(p.placement);
    }
    if (p.global_batch_seqs > 0) out << " batch=" << p.global_batch_seqs;
    if (p.checkpoint_interval_s > 0) out << " ckpt=" << p.checkpoint_interval_s << "s";
    return out.str();
}

}  // namespace prism
