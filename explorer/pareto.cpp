#include "explorer/pareto.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "src/common/error.hpp"

namespace prism::explorer {
namespace {

/// The feasible rows in "smaller is better" form, flat: row r's objectives at [r*k, r*k + k).
struct Minimized {
    std::size_t k = 0;
    std::vector<double> data;
    std::vector<std::size_t> positions;  // row position in the caller's table, per kept row

    const double* row(std::size_t r) const { return data.data() + r * k; }
    std::size_t size() const { return positions.size(); }
};

void check_shape(const std::vector<std::vector<double>>& values, const std::vector<bool>& maximize,
                 const char* caller) {
    if (maximize.empty()) throw Error(std::string(caller) + ": no objectives");
    for (std::size_t r = 0; r < values.size(); ++r) {
        if (values[r].size() != maximize.size()) {
            throw Error(std::string(caller) + ": row " + std::to_string(r) + " has " +
                        std::to_string(values[r].size()) + " values, expected " +
                        std::to_string(maximize.size()));
        }
    }
}

bool has_nan(const double* v, std::size_t k) {
    for (std::size_t j = 0; j < k; ++j) {
        if (std::isnan(v[j])) return true;
    }
    return false;
}

Minimized minimize(const std::vector<std::vector<double>>& values,
                   const std::vector<bool>& maximize) {
    Minimized m;
    m.k = maximize.size();
    m.data.reserve(values.size() * m.k);
    m.positions.reserve(values.size());
    for (std::size_t r = 0; r < values.size(); ++r) {
        if (has_nan(values[r].data(), m.k)) continue;
        for (std::size_t j = 0; j < m.k; ++j) {
            m.data.push_back(maximize[j] ? -values[r][j] : values[r][j]);
        }
        m.positions.push_back(r);
    }
    return m;
}

/// a dominates b (both minimized, no NaN).
bool dominates(const double* a, const double* b, std::size_t k) {
    bool strictly = false;
    for (std::size_t j = 0; j < k; ++j) {
        if (a[j] > b[j]) return false;
        if (a[j] < b[j]) strictly = true;
    }
    return strictly;
}

/// Kept-row numbers in lexicographic order of their objectives (ties by row, so deterministic).
/// A row's dominators all come before it in this order.
std::vector<std::size_t> lexicographic_order(const Minimized& m) {
    // The first objective sits next to the row number so that most comparisons stay in the
    // contiguous key array; only ties look at the other objectives.
    struct Key {
        double f0;
        std::size_t r;
    };
    std::vector<Key> keys(m.size());
    for (std::size_t r = 0; r < m.size(); ++r) keys[r] = Key{m.row(r)[0], r};
    std::sort(keys.begin(), keys.end(), [&m](const Key& a, const Key& b) {
        if (a.f0 != b.f0) return a.f0 < b.f0;
        const double* va = m.row(a.r);
        const double* vb = m.row(b.r);
        for (std::size_t j = 1; j < m.k; ++j) {
            if (va[j] < vb[j]) return true;
            if (vb[j] < va[j]) return false;
        }
        return a.r < b.r;
    });
    std::vector<std::size_t> order(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) order[i] = keys[i].r;
    return order;
}

std::vector<std::size_t> front_two(const Minimized& m, const std::vector<std::size_t>& order) {
    // Sweep by f0 ascending: within a group of equal f0 only the rows with the group's least f1
    // can survive, and they do when that f1 is below every f1 seen at a strictly smaller f0.
    std::vector<std::size_t> front;
    double best_f1 = std::numeric_limits<double>::infinity();
    bool have_best = false;
    std::size_t i = 0;
    while (i < order.size()) {
        const double f0 = m.row(order[i])[0];
        const double group_min_f1 = m.row(order[i])[1];  // sorted: the first is the least
        std::size_t j = i;
        while (j < order.size() && m.row(order[j])[0] == f0) {
            if (m.row(order[j])[1] == group_min_f1 && (!have_best || group_min_f1 < best_f1)) {
                front.push_back(m.positions[order[j]]);
            }
            ++j;
        }
        if (!have_best || group_min_f1 < best_f1) best_f1 = group_min_f1;
        have_best = true;
        i = j;
    }
    return front;
}

std::vector<std::size_t> front_general(const Minimized& m, const std::vector<std::size_t>& order) {
    // In lexicographic order nobody is dominated by a later row, so the front only grows; a row
    // dominated by anyone is dominated by a front member (transitivity).
    std::vector<std::size_t> front_rows;
    for (const std::size_t r : order) {
        const double* v = m.row(r);
        bool dominated = false;
        // Recent members are closest in lexicographic order: the likeliest dominators.
        for (auto it = front_rows.rbegin(); it != front_rows.rend(); ++it) {
            if (dominates(m.row(*it), v, m.k)) {
                dominated = true;
                break;
            }
        }
        if (!dominated) front_rows.push_back(r);
    }
    std::vector<std::size_t> front;
    front.reserve(front_rows.size());
    for (const std::size_t r : front_rows) front.push_back(m.positions[r]);
    return front;
}

}  // namespace

std::vector<std::size_t> pareto_front(const std::vector<std::vector<double>>& values,
                                      const std::vector<bool>& maximize) {
    check_shape(values, maximize, "pareto_front");
    const Minimized m = minimize(values, maximize);
    const std::vector<std::size_t> order = lexicographic_order(m);
    std::vector<std::size_t> front =
        m.k == 2 ? front_two(m, order) : front_general(m, order);  // k == 1 is general's case
    std::sort(front.begin(), front.end());
    return front;
}

std::vector<int> nondominated_ranks(const std::vector<std::vector<double>>& values,
                                    const std::vector<bool>& maximize) {
    check_shape(values, maximize, "nondominated_ranks");
    const Minimized m = minimize(values, maximize);
    const std::vector<std::size_t> order = lexicographic_order(m);
    std::vector<int> ranks(values.size(), -1);
    std::vector<std::vector<std::size_t>> layers;  // kept-row numbers, in lexicographic order

    // Whether some member of `layer` dominates row r. With two objectives a layer's members in
    // lexicographic order have decreasing f1, so its last member is its only candidate.
    const auto layer_dominates = [&m](const std::vector<std::size_t>& layer, std::size_t r) {
        const double* v = m.row(r);
        if (m.k <= 2) return dominates(m.row(layer.back()), v, m.k);
        for (auto it = layer.rbegin(); it != layer.rend(); ++it) {
            if (dominates(m.row(*it), v, m.k)) return true;
        }
        return false;
    };

    for (const std::size_t r : order) {
        // "Layer l dominates r" is monotone: true below r's rank, false from it on, since each
        // member of layer l+1 is dominated by one of layer l.
        std::size_t lo = 0;
        std::size_t hi = layers.size();
        while (lo < hi) {
            const std::size_t mid = lo + (hi - lo) / 2;
            if (layer_dominates(layers[mid], r)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo == layers.size()) layers.emplace_back();
        layers[lo].push_back(r);
        ranks[m.positions[r]] = static_cast<int>(lo);
    }
    return ranks;
}

ParetoArchive::ParetoArchive(std::vector<bool> maximize) : maximize_(std::move(maximize)) {
    if (maximize_.empty()) throw Error("pareto archive: no objectives");
}

bool ParetoArchive::insert(std::uint64_t index, const double* values) {
    const std::size_t k = maximize_.size();
    if (has_nan(values, k)) return false;
    if (k == 2) {
        return insert2(index, maximize_[0] ? -values[0] : values[0],
                       maximize_[1] ? -values[1] : values[1]);
    }
    std::vector<double> minimized(k);
    for (std::size_t j = 0; j < k; ++j) minimized[j] = maximize_[j] ? -values[j] : values[j];
    return insertk(index, minimized);
}

bool ParetoArchive::insert(std::uint64_t index, const std::vector<double>& values) {
    if (values.size() != maximize_.size()) {
        throw Error("pareto archive: row " + std::to_string(index) + " has " +
                    std::to_string(values.size()) + " values, expected " +
                    std::to_string(maximize_.size()));
    }
    return insert(index, values.data());
}

bool ParetoArchive::insert2(std::uint64_t index, double f0, double f1) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    constexpr std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
    // The member with the greatest f0 <= ours has the least f1 among all members with f0 <= ours:
    // if it does not dominate the new point, nobody does.
    auto after = front2_.upper_bound(Point2{f0, inf, last});
    if (after != front2_.begin()) {
        const Point2& q = *std::prev(after);
        const bool same = q.f0 == f0 && q.f1 == f1;
        if (q.f1 <= f1 && !same) return false;
    }
    // The members the new point dominates have f0 >= ours and f1 >= ours: a contiguous run from
    // the first member with f0 >= ours, since f1 decreases along the set.
    auto it = front2_.lower_bound(Point2{f0, -inf, 0});
    while (it != front2_.end() && it->f1 >= f1) {
        if (it->f0 == f0 && it->f1 == f1) {
            ++it;  // a duplicate: both stay
        } else {
            it = front2_.erase(it);
        }
    }
    front2_.insert(Point2{f0, f1, index});
    return true;
}

bool ParetoArchive::dominated(const double* values) const {
    const std::size_t k = maximize_.size();
    std::vector<double> v(k);
    for (std::size_t j = 0; j < k; ++j) {
        if (std::isnan(values[j])) return false;
        v[j] = maximize_[j] ? -values[j] : values[j];
    }
    if (k == 2) {
        // the member with the greatest f0 <= v0 has the least f1 among those (insert2)
        constexpr double inf = std::numeric_limits<double>::infinity();
        constexpr std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
        auto after = front2_.upper_bound(Point2{v[0], inf, last});
        if (after == front2_.begin()) return false;
        const Point2& q = *std::prev(after);
        return q.f1 < v[1] || (q.f1 == v[1] && q.f0 < v[0]);
    }
    for (std::size_t i = 0; i < indicesk_.size(); ++i) {
        if (dominates(frontk_.data() + i * k, v.data(), k)) return true;
    }
    return false;
}

bool ParetoArchive::insertk(std::uint64_t index, const std::vector<double>& minimized) {
    const std::size_t k = maximize_.size();
    const double* v = minimized.data();
    // One pass with compaction: if a member dominates the new point, the new point dominates no
    // member (that member would dominate it too), so nothing was dropped before we return.
    std::size_t kept = 0;
    const std::size_t n = indicesk_.size();
    for (std::size_t i = 0; i < n; ++i) {
        const double* member = frontk_.data() + i * k;
        if (dominates(member, v, k)) return false;
        if (dominates(v, member, k)) continue;
        if (kept != i) {
            std::copy(member, member + k, frontk_.begin() + static_cast<std::ptrdiff_t>(kept * k));
            indicesk_[kept] = indicesk_[i];
        }
        ++kept;
    }
    frontk_.resize(kept * k);
    indicesk_.resize(kept);
    frontk_.insert(frontk_.end(), minimized.begin(), minimized.end());
    indicesk_.push_back(index);
    return true;
}

void ParetoArchive::merge(const ParetoArchive& other) {
    if (other.maximize_ != maximize_) {
        throw Error("pareto archive: cannot merge archives with different objectives");
    }
    if (maximize_.size() == 2) {
        for (const Point2& p : other.front2_) insert2(p.index, p.f0, p.f1);
        return;
    }
    const std::size_t k = maximize_.size();
    for (std::size_t i = 0; i < other.indicesk_.size(); ++i) {
        const auto begin = other.frontk_.begin() + static_cast<std::ptrdiff_t>(i * k);
        insertk(other.indicesk_[i],
                std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(k)));
    }
}

std::vector<std::uint64_t> ParetoArchive::indices() const {
    std::vector<std::uint64_t> out;
    out.reserve(size());
    if (maximize_.size() == 2) {
        for (const Point2& p : front2_) out.push_back(p.index);
    } else {
        out = indicesk_;
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::vector<double>> ParetoArchive::values() const {
    const std::size_t k = maximize_.size();
    std::vector<std::pair<std::uint64_t, std::vector<double>>> rows;
    rows.reserve(size());
    if (k == 2) {
        for (const Point2& p : front2_) rows.push_back({p.index, {p.f0, p.f1}});
    } else {
        for (std::size_t i = 0; i < indicesk_.size(); ++i) {
            const auto begin = frontk_.begin() + static_cast<std::ptrdiff_t>(i * k);
            rows.push_back(
                {indicesk_[i], std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(k))});
        }
    }
    std::sort(rows.begin(), rows.end());
    std::vector<std::vector<double>> out;
    out.reserve(rows.size());
    for (auto& [index, v] : rows) {
        for (std::size_t j = 0; j < k; ++j) {
            if (maximize_[j]) v[j] = -v[j];
        }
        out.push_back(std::move(v));
    }
    return out;
}

std::size_t ParetoArchive::size() const noexcept {
    return maximize_.size() == 2 ? front2_.size() : indicesk_.size();
}

void ParetoArchive::clear() noexcept {
    front2_.clear();
    frontk_.clear();
    indicesk_.clear();
}

}  // namespace prism::explorer
