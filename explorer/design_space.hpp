#pragma once

// Lazy enumeration of the Cartesian design space: index <-> point by mixed-radix decoding. The
// last [space] dimension varies fastest. Nothing is materialized.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

  private:
    const Experiment* experiment_;
    std::vector<std::uint64_t> radix_;
    std::uint64_t size_ = 1;
};

}  // namespace prism::explorer
