#pragma once

// Lazy enumeration of the Cartesian design space: index <-> point by mixed-radix decoding. The
// last [space] dimension varies fastest. Nothing is materialized.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/result_store.hpp"
#include "src/model/design_space.hpp"
#include "src/model/spec.hpp"

namespace prism::explorer {

class DesignSpace {
  public:
    /// Throws ConfigError when the space is empty or has more than 2^62 points.
    explicit DesignSpace(const Experiment& experiment);

    std::uint64_t size() const noexcept { return size_; }
    std::size_t dimension_count() const noexcept { return radix_.size(); }

    /// Value index per dimension of point `index` (< size()).
    std::vector<std::size_t> digits(std::uint64_t index) const;
    /// Inverse of digits().
    std::uint64_t index_of(const std::vector<std::size_t>& digits) const;

    /// The design point of `index`, or the reason it is filtered out before evaluation.
    struct Decoded {
        DesignPoint point;
        std::optional<std::string> filtered;
    };
    Decoded decode(std::uint64_t index) const;

    /// The design point of `index` without the filters (for indices already known to pass).
    DesignPoint point(std::uint64_t index) const;

    /// The index whose random streams point `index` uses: `index` with the dimensions that do
    /// not change the training steps (`learning_rate`, `checkpoint_interval`, `b_noise`) at their
    /// first value. Points that differ only there run the same steps: they share one step-time
    /// distribution (evaluated once, see prism::StepCache) and one failure history (common
    /// random numbers across checkpoint intervals), whatever the chunking or rank count.
    std::uint64_t stream_index(std::uint64_t index) const;
    /// How many points share each stream index (the product of those dimensions' sizes).
    std::uint64_t points_per_stream() const noexcept { return per_stream_; }

  private:
    const Experiment* experiment_;
    std::vector<std::uint64_t> radix_;
    std::vector<bool> step_neutral_;  ///< per dimension: does not change the steps
    std::uint64_t per_stream_ = 1;
    std::uint64_t size_ = 1;
};

/// Points of [begin, end) rejected before evaluation, by reason in order of first appearance
/// (decodes every index).
io::FilteredCounts count_filtered(const DesignSpace& space, std::uint64_t begin, std::uint64_t end);

}  // namespace prism::explorer
