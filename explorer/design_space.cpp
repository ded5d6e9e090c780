#include "explorer/design_space.hpp"

#include "io/work_limits.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {

DesignSpace::DesignSpace(const Experiment& experiment) : experiment_(&experiment) {
    constexpr std::uint64_t kMaxSize = std::uint64_t{1} << 62;
    for (const auto& dim : experiment.space.dimensions) {
        if (dim.values.empty()) throw ConfigError("space." + dim.name + ": the list is empty");
        const std::uint64_t r = dim.values.size();
        if (size_ > kMaxSize / r) {
            throw ConfigError("space: more than 2^62 points; split the experiment");
        }
        radix_.push_back(r);
        size_ *= r;
        const bool neutral = dim.name == "learning_rate" || dim.name == "checkpoint_interval" ||
                             dim.name == "b_noise";
        step_neutral_.push_back(neutral);
        if (neutral) per_stream_ *= r;
    }
}

std::vector<std::size_t> DesignSpace::digits(std::uint64_t index) const {
    std::vector<std::size_t> out(radix_.size());
    for (std::size_t k = radix_.size(); k-- > 0;) {
        out[k] = static_cast<std::size_t>(index % radix_[k]);
        index /= radix_[k];
    }
    return out;
}

std::uint64_t DesignSpace::index_of(const std::vector<std::size_t>& digits) const {
    std::uint64_t index = 0;
    for (std::size_t k = 0; k < radix_.size(); ++k) index = index * radix_[k] + digits[k];
    return index;
}

std::uint64_t DesignSpace::stream_index(std::uint64_t index) const {
    if (per_stream_ == 1) return index;  // no such dimension with more than one value
    auto d = digits(index);
    for (std::size_t k = 0; k < d.size(); ++k) {
        if (step_neutral_[k]) d[k] = 0;
    }
    return index_of(d);
}

DesignPoint DesignSpace::point(std::uint64_t index) const {
    return decode_point(*experiment_, digits(index));
}

DesignSpace::Decoded DesignSpace::decode(std::uint64_t index) const {
    bool not_divisible = false;
    Decoded d{decode_point(*experiment_, digits(index), &not_divisible), std::nullopt};
    if (not_divisible) {
        d.filtered = "gpus is not a multiple of tp * pp * cp";
    } else {
        d.filtered = filter_reason(*experiment_, d.point);
        if (!d.filtered) d.filtered = io::work_limit_reason(*experiment_, d.point);
    }
    return d;
}

io::FilteredCounts count_filtered(const DesignSpace& space, std::uint64_t begin,
                                  std::uint64_t end) {
    io::FilteredCounts counts;
    for (std::uint64_t index = begin; index < end; ++index) {
        if (auto why = space.decode(index).filtered) io::add_filtered(counts, *why, 1);
    }
    return counts;
}

}  // namespace prism::explorer
