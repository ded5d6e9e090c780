#include "src/stochastic/detail/analytic/unit_patterns.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>

#include "src/stochastic/detail/hash.hpp"

namespace prism::stochastic::detail::ssta {

const UnitPatterns& unit_patterns(const StepModel& m, const PersistentLayout& l) {
    struct Entry {
        std::vector<std::int64_t> key;
        UnitPatterns patterns;
    };
    thread_local std::unordered_map<std::uint64_t, std::vector<Entry>> cache;
    std::vector<std::int64_t> key{l.stages,    l.dp,       l.group_gpus,
                                  l.unit_gpus, l.job_gpus, static_cast<std::int64_t>(l.kind)};
    key.insert(key.end(), m.placement_key.begin(), m.placement_key.end());
    std::uint64_t h = 0;
    for (const auto k : key) h = hash_mix(h, static_cast<std::uint64_t>(k));
    auto& bucket = cache[h];
    for (const auto& e : bucket) {
        if (e.key == key) return e.patterns;
    }
    if (cache.size() > 256) {
        cache.clear();
        return unit_patterns(m, l);
    }
    UnitPatterns out;
    const int p = l.stages;
    std::vector<std::int32_t> group_of(static_cast<size_t>(l.job_gpus));
    for (size_t j = 0; j < l.gpu_of.size(); ++j) {
        group_of[l.gpu_of[j]] = static_cast<std::int32_t>(j / l.group_gpus);
    }
    std::map<std::vector<std::vector<int>>, int> freq;
    std::map<std::vector<std::pair<int, int>>, int> freq_lock;
    for (std::int64_t u = 0; u < l.job_units; ++u) {
        std::map<int, std::vector<int>> per_rep;
        std::map<int, int> per_group;
        for (std::int64_t k = u * l.unit_gpus;
             k < std::min<std::int64_t>((u + 1) * l.unit_gpus, l.job_gpus); ++k) {
            const int gi = group_of[k];
            auto& sig = per_rep[gi % l.dp];
            sig.resize(p, 0);
            sig[gi / l.dp]++;
            per_group[gi]++;
        }
        std::vector<std::vector<int>> pat;
        for (auto& [r, sig] : per_rep) pat.push_back(sig);
        std::sort(pat.begin(), pat.end());
        freq[pat]++;
        std::vector<std::pair<int, int>> lpat;
        for (const auto& [gi, c] : per_group) lpat.push_back({gi / l.dp, c});
        std::sort(lpat.begin(), lpat.end());
        freq_lock[lpat]++;
    }
    const auto units = static_cast<double>(l.job_units);
    for (const auto& [pat, c] : freq) out.replicas.push_back({c / units, pat});
    for (const auto& [pat, c] : freq_lock) out.lockstep.push_back({c / units, pat});
    bucket.push_back({key, std::move(out)});
    return bucket.back().patterns;
}

}  // namespace prism::stochastic::detail::ssta
