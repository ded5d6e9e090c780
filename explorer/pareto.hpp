#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <vector>

namespace prism::explorer {

// Dominance, with every objective turned into "smaller is better" (maximized ones negated):
// a dominates b when a <= b in every objective and a < b in at least one. Identical objective
// vectors do not dominate each other, so duplicates share a front. A row with a NaN in any
// objective is infeasible: it is never in a front and never dominates anything.

/// Row positions of the non-dominated rows of `values` ([row][objective]), ascending.
/// `maximize[j]` says whether objective j is maximized. O(n log n) for one or two objectives
/// (sort and sweep); for three or more, a sort and a scan against the front found so far,
/// O(n log n + n * |front| * k). Throws prism::Error when there are no objectives or a row's
/// length differs from `maximize.size()`.
std::vector<std::size_t> pareto_front(const std::vector<std::vector<double>>& values,
                                      const std::vector<bool>& maximize);

/// Non-dominated sorting: rank 0 is the Pareto front, rank 1 the front of what remains, and so
/// on; -1 for rows with a NaN. Efficient non-dominated sort with binary search over the layers
/// (Zhang et al., "An efficient approach to non-dominated sorting for evolutionary
/// multi-objective optimization", IEEE TEVC 2015); O(n log n) for two objectives.
/// Throws like pareto_front.
std::vector<int> nondominated_ranks(const std::vector<std::vector<double>>& values,
                                    const std::vector<bool>& maximize);

/// The Pareto front of a stream of rows, keeping only the current non-dominated set (memory
/// proportional to the front, not to the stream). After any sequence of inserts, indices() is
/// the set pareto_front would return for all inserted rows, whatever the insertion order
/// (dominance is transitive: a non-dominated row is never evicted, and every dominated row is
/// dominated by a non-dominated one that rejects or evicts it). Two objectives use an ordered
/// set, O(log |front|) amortized per insert; more use a scan of the front.
class ParetoArchive {
  public:
    /// Throws prism::Error when `maximize` is empty.
    explicit ParetoArchive(std::vector<bool> maximize);

    /// Offers row `index` with `num_objectives()` values at `values`. Returns whether the row is
    /// in the front now. Rows with a NaN are rejected. Indices are caller-chosen labels
    /// (design-point indices); inserting the same index twice keeps both copies.
    bool insert(std::uint64_t index, const double* values);
    bool insert(std::uint64_t index, const std::vector<double>& values);

    /// Whether some member dominates the vector `values` (num_objectives() entries, not
    /// negated; false when one is NaN): exactly when some row inserted so far dominates it
    /// (a dominated row is dominated by a member too). O(log |front|) for two objectives.
    bool dominated(const double* values) const;

    /// Inserts every row of `other` (same objectives; throws prism::Error otherwise): merging
    /// per-worker archives gives the archive of all their rows.
    void merge(const ParetoArchive& other);

    /// Indices of the current front, ascending.
    std::vector<std::uint64_t> indices() const;

    /// Objective values of the current front, in the order of indices(), as inserted (not
    /// negated).
    std::vector<std::vector<double>> values() const;

    std::size_t size() const noexcept;
    std::size_t num_objectives() const noexcept { return maximize_.size(); }
    const std::vector<bool>& maximize() const noexcept { return maximize_; }
    void clear() noexcept;

  private:
    struct Point2 {
        double f0;  // minimized form
        double f1;
        std::uint64_t index;
        bool operator<(const Point2& o) const noexcept {
            if (f0 != o.f0) return f0 < o.f0;
            if (f1 != o.f1) return f1 < o.f1;
            return index < o.index;
        }
    };

    bool insert2(std::uint64_t index, double f0, double f1);
    bool insertk(std::uint64_t index, const std::vector<double>& minimized);

    std::vector<bool> maximize_;
    std::set<Point2> front2_;     // two objectives: f1 decreases strictly as f0 grows
    std::vector<double> frontk_;  // k >= 3 (and k == 1): flat, minimized form
    std::vector<std::uint64_t> indicesk_;
};

}  // namespace prism::explorer
