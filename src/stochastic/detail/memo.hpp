#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace prism::stochastic::detail {

/// A small memo of values by exact key for one call site, meant to be `thread_local`: a linear
/// search over the few keys one sweep worker meets, emptied whole when it reaches `capacity`.
template <class Key, class Value>
class SmallMemo {
  public:
    explicit SmallMemo(std::size_t capacity) : capacity_(capacity) {}

    /// The value stored for `key`, else `compute()` stored and returned.
    template <class Compute>
    Value get(const Key& key, Compute compute) {
        for (const auto& [k, v] : entries_) {
            if (k == key) return v;
        }
        Value value = compute();
        if (entries_.size() >= capacity_) entries_.clear();
        entries_.emplace_back(key, value);
        return value;
    }

  private:
    std::size_t capacity_;
    std::vector<std::pair<Key, Value>> entries_;
};

}  // namespace prism::stochastic::detail
