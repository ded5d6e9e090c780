#pragma once

// The median of a sample (the mean of the two middle values for an even count).

#include <algorithm>
#include <vector>

namespace prism::fit::detail {

inline double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace prism::fit::detail
