#pragma once

// Independent truth for the Pareto and pruning tests: the definition of dominance, applied to
// one pair (callers apply it to every pair, O(n^2)).

#include <cstddef>
#include <vector>

namespace prism::explorer::truth {

/// Whether `a` dominates `b`: no worse in every objective, strictly better in one.
inline bool brute_dominates(const std::vector<double>& a, const std::vector<double>& b,
                            const std::vector<bool>& maximize) {
    bool strictly = false;
    for (std::size_t j = 0; j < a.size(); ++j) {
        const bool better = maximize[j] ? a[j] > b[j] : a[j] < b[j];
        const bool worse = maximize[j] ? a[j] < b[j] : a[j] > b[j];
        if (worse) return false;
        if (better) strictly = true;
    }
    return strictly;
}

}  // namespace prism::explorer::truth
