#include "src/stochastic/detail/persistent.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

namespace prism::stochastic::detail {

PersistentLayout make_layout(const StepModel& model, const DesignPoint& point,
                             const HardwareSpec& hw, const ClusterSpec& cluster) {
    PersistentLayout l;
    l.kind = point.placement.kind;
    l.stages = model.stages;
    l.dp = model.dp;
    l.group_gpus = model.group_gpus;
    l.unit_gpus = model.slow_unit_gpus;
    l.job_gpus = static_cast<std::int64_t>(l.group_gpus) * l.stages * l.dp;
    const std::int64_t machine_gpus = std::max<std::int64_t>(l.job_gpus, cluster.total_gpus);
    l.machine_units = (machine_gpus + l.unit_gpus - 1) / l.unit_gpus;
    l.job_units = (l.job_gpus + l.unit_gpus - 1) / l.unit_gpus;
    if (model.persistent_deterministic) return l;

    // sizes of (tp, cp, pp, dp); the group's tp x cp members are enumerated as one dimension
    const int tp = std::max(1, point.tp);
    const int cp = std::max(1, point.cp);
    const int tpcp = tp * cp == l.group_gpus ? tp : l.group_gpus;  // profile and point agree
    const int cpn = tp * cp == l.group_gpus ? cp : 1;
    const std::array<std::int64_t, 4> size{tpcp, cpn, l.stages, l.dp};
    std::array<std::int64_t, 4> stride{};
    std::int64_t acc = 1;
    for (const ParallelDim d : point.placement.order) {
        stride[static_cast<int>(d)] = acc;
        acc *= size[static_cast<int>(d)];
    }
    l.gpu_of.resize(static_cast<size_t>(l.job_gpus));
    for (int s = 0; s < l.stages; ++s) {
        for (int r = 0; r < l.dp; ++r) {
            const std::int64_t gi = static_cast<std::int64_t>(s) * l.dp + r;
            std::int64_t j = 0;
            for (int c = 0; c < cpn; ++c) {
                for (int t = 0; t < tpcp; ++t) {
                    l.gpu_of[gi * l.group_gpus + j++] = static_cast<std::int32_t>(
                        t * stride[0] + c * stride[1] + s * stride[2] + r * stride[3]);
                }
            }
        }
    }
    // stages by increasing work, then replicas
    std::vector<int> stage_order(l.stages);
    std::iota(stage_order.begin(), stage_order.end(), 0);
    std::stable_sort(stage_order.begin(), stage_order.end(),
                     [&](int a, int b) { return model.stage_work_s[a] < model.stage_work_s[b]; });
    for (const int s : stage_order) {
        for (int r = 0; r < l.dp; ++r) l.preference.push_back(s * l.dp + r);
    }
    return l;
}

namespace {

/// The group's factor: the largest member factor mapped by the effective factor
double group_factor(const StepModel& m, int slow, int n, Stream& stream) {
    double g = 0;
    if (slow > 0) g = m.slow_factor * m.spatial.max_quantile(stream.uniform(), slow);
    if (n - slow > 0) g = std::max(g, m.spatial.max_quantile(stream.uniform(), n - slow));
    return m.lockstep ? g : m.group_factor(slow, g);  // lockstep: mapped after the max
}

}  // namespace

void draw_group_factors(const StepModel& m, const PersistentLayout& l, Stream& stream,
                        std::vector<double>& g, std::vector<int>* slow_out) {
    const int groups = l.stages * l.dp;
    const int n = l.group_gpus;
    g.assign(groups, 1.0);
    if (slow_out != nullptr) slow_out->assign(groups, 0);
    if (m.persistent_deterministic) return;

    // slow units of the machine
    std::vector<std::uint8_t> slow(static_cast<size_t>(l.machine_units), 0);
    std::int64_t slow_count = 0;
    if (m.slow_probability > 0 && m.slow_factor != 1.0) {
        for (auto& f : slow) {
            f = stream.uniform() < m.slow_probability;
            slow_count += f;
        }
    }
    std::vector<int> slow_members(groups, 0);
    switch (l.kind) {
        case PlacementKind::ordered:
            for (int gi = 0; gi < groups; ++gi) {
                for (int j = 0; j < n; ++j) {
                    slow_members[gi] +=
                        slow[l.gpu_of[static_cast<size_t>(gi) * n + j] / l.unit_gpus];
                }
            }
            break;
        case PlacementKind::random: {
            // node-random: the job's units are a uniformly random injection into the machine's
            // units (partial Fisher-Yates), the ranks laid onto them in order
            std::vector<std::int64_t> unit(static_cast<size_t>(l.machine_units));
            std::iota(unit.begin(), unit.end(), 0);
            for (std::int64_t i = 0; i < l.job_units; ++i) {
                const auto j = i + static_cast<std::int64_t>(
                                       stream.uniform() * static_cast<double>(l.machine_units - i));
                std::swap(unit[i], unit[std::min(j, l.machine_units - 1)]);
            }
            for (int gi = 0; gi < groups; ++gi) {
                for (int j = 0; j < n; ++j) {
                    const auto gpu = l.gpu_of[static_cast<size_t>(gi) * n + j];
                    slow_members[gi] += slow[unit[gpu / l.unit_gpus]];
                }
            }
            break;
        }
        case PlacementKind::variability_aware: {
            const std::int64_t spare = l.machine_units - l.job_units;
            const std::int64_t used_slow = std::max<std::int64_t>(0, slow_count - spare);
            std::int64_t slow_gpus = used_slow * l.unit_gpus;
            for (const auto gi : l.preference) {
                if (slow_gpus <= 0) break;
                const int k = static_cast<int>(std::min<std::int64_t>(n, slow_gpus));
                slow_members[gi] = k;
                slow_gpus -= k;
            }
            break;
        }
    }
    for (int gi = 0; gi < groups; ++gi) g[gi] = group_factor(m, slow_members[gi], n, stream);
    if (slow_out != nullptr) *slow_out = std::move(slow_members);
}

std::int64_t draw_slow_units(double q, std::int64_t units, Stream& stream,
                             std::vector<std::int64_t>* out) {
    if (out != nullptr) out->clear();
    if (!(q > 0) || units <= 0) return 0;
    if (q >= 1) {
        if (out != nullptr) {
            for (std::int64_t u = 0; u < units; ++u) out->push_back(u);
        }
        return units;
    }
    // P(gap >= k) = (1 - q)^k: gap = floor(ln U / ln(1 - q)), U uniform on (0, 1)
    const double inv_log_healthy = 1.0 / std::log1p(-q);
    std::int64_t count = 0;
    double next = 0;  // as a double: a huge gap must not overflow
    for (;;) {
        next += std::floor(std::log(stream.uniform()) * inv_log_healthy);
        if (!(next < static_cast<double>(units))) break;
        const auto u = static_cast<std::int64_t>(next);
        if (out != nullptr) out->push_back(u);
        ++count;
        next += 1;
    }
    return count;
}

HealthyQuantile::HealthyQuantile(const Distribution& spatial, int n) : spatial_(spatial), n_(n) {
    constexpr int cells = (kMaxExp - kMinExp) * kCells;
    coef_.assign(static_cast<size_t>(cells) * (kDegree + 1), 0.0);
    ok_.assign(cells, 0);
    for (int c = 0; c < kCells; ++c) centre_[c] = 1.0 + (c + 0.5) / kCells;
    const auto kind = spatial.kind();
    if (kind != DistKind::normal && kind != DistKind::lognormal && kind != DistKind::gamma) return;
    constexpr int nodes = kDegree + 1;
    std::array<double, nodes> f{};
    for (int e = kMinExp; e < kMaxExp; ++e) {
        const double scale = std::ldexp(1.0, e);
        for (int c = 0; c < kCells; ++c) {
            const int cell = (e - kMinExp) * kCells + c;
            auto y_at = [&](double t) { return scale * (centre_[c] + t / (2.0 * kCells)); };
            // Chebyshev interpolation at the nodes cos(pi (j + 1/2) / nodes)
            for (int j = 0; j < nodes; ++j) {
                f[j] = exact(-y_at(std::cos(M_PI * (j + 0.5) / nodes)));
            }
            // Chebyshev coefficients, then the power basis (T_k's coefficients are integers)
            double* coef = coef_.data() + static_cast<size_t>(cell) * nodes;
            std::array<double, nodes> tk{}, tk1{}, tk2{};  // T_k, T_(k-1), T_(k-2) in powers of t
            bool finite = true;
            for (int k = 0; k < nodes; ++k) {
                double sum = 0;
                for (int j = 0; j < nodes; ++j)
                    sum += f[j] * std::cos(M_PI * k * (j + 0.5) / nodes);
                const double ck = sum * (k == 0 ? 1.0 : 2.0) / nodes;
                if (k == 0) {
                    tk.fill(0.0);
                    tk[0] = 1.0;
                } else if (k == 1) {
                    tk.fill(0.0);
                    tk[1] = 1.0;
                } else {
                    for (int i = 0; i < nodes; ++i)
                        tk[i] = (i > 0 ? 2.0 * tk1[i - 1] : 0.0) - tk2[i];
                }
                for (int i = 0; i <= k; ++i) coef[i] += ck * tk[i];
                tk2 = tk1;
                tk1 = tk;
                finite = finite && std::isfinite(ck);
            }
            if (!finite) continue;
            ok_[cell] = 1;
            // checks between the nodes (the interpolant's error peaks there) and at the ends
            double err = 0;
            constexpr int checks = 2 * nodes + 1;
            for (int j = 0; j <= checks; ++j) {
                const double t = j == checks ? 1.0 : std::cos(M_PI * j / checks);
                const double lp = -y_at(t);
                const double want = exact(lp);
                const double got = (*this)(lp);
                const double rel = std::fabs(got - want) / std::max(std::fabs(want), 1e-300);
                err = std::max(err, std::isfinite(rel) ? rel : HUGE_VAL);
            }
            if (err > kTolerance) {
                ok_[cell] = 0;
            } else {
                max_err_ = std::max(max_err_, err);
            }
        }
    }
}

std::shared_ptr<const HealthyQuantile> HealthyQuantile::cached(const Distribution& spatial,
                                                               std::uint64_t spatial_id, int n) {
    thread_local std::map<std::pair<std::uint64_t, int>, std::shared_ptr<const HealthyQuantile>>
        cache;
    auto& slot = cache[{spatial_id, n}];
    if (!slot) {
        if (cache.size() > 64) {
            // a sweep over many spatial laws: start over rather than grow
            cache.clear();
            return cached(spatial, spatial_id, n);
        }
        slot = std::make_shared<const HealthyQuantile>(spatial, n);
    }
    return slot;
}

double HealthyQuantile::exact_of(const Distribution& spatial, int n, double log_p) {
    // H^-1(p) = F_S^-1(p^(1/n)) through the upper tail, as Distribution::max_quantile
    return spatial.quantile_upper(-std::expm1(log_p / n));
}

double HealthyQuantile::exact(double log_p) const { return exact_of(spatial_, n_, log_p); }

int HealthyQuantile::cells_kept() const {
    int k = 0;
    for (const auto o : ok_) k += o;
    return k;
}

LazyGroupFactors::LazyGroupFactors(const StepModel& model, const PersistentLayout& layout)
    : m_(model),
      l_(layout),
      healthy_(HealthyQuantile::cached(model.spatial, model.spatial_id, layout.group_gpus)),
      stream_(0, 0, StreamKind::test, 0),
      groups_(layout.stages * layout.dp),
      g_(static_cast<size_t>(groups_), 1.0),
      log_cap_(static_cast<size_t>(groups_), 0.0),
      cap_(static_cast<size_t>(groups_), 0.0),
      state_(static_cast<size_t>(groups_), kPool),
      slow_members_(static_cast<size_t>(groups_), 0),
      pool_list_(static_cast<size_t>(groups_)),
      pool_pos_(static_cast<size_t>(groups_)),
      touched_(static_cast<size_t>(groups_) + 4) {
    std::iota(pool_list_.begin(), pool_list_.end(), 0);
    std::iota(pool_pos_.begin(), pool_pos_.end(), 0);
    if (layout.kind == PlacementKind::variability_aware || !supports(model, layout)) return;
    // ordered (and node-random) placement: slow unit -> (group, GPUs of the unit in it), in CSR
    // form
    std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> per_unit(
        static_cast<size_t>(layout.job_units));
    for (std::int64_t gi = 0; gi < groups_; ++gi) {
        for (int j = 0; j < layout.group_gpus; ++j) {
            auto& list = per_unit[layout.gpu_of[gi * layout.group_gpus + j] / layout.unit_gpus];
            if (list.empty() || list.back().first != gi) {
                list.emplace_back(static_cast<std::int32_t>(gi), 0);
            }
            ++list.back().second;
        }
    }
    unit_group_begin_.push_back(0);
    for (const auto& list : per_unit) {
        for (const auto& [gi, k] : list) {
            unit_group_.push_back(gi);
            unit_group_gpus_.push_back(k);
        }
        unit_group_begin_.push_back(static_cast<std::int32_t>(unit_group_.size()));
    }
}

bool LazyGroupFactors::supports(const StepModel& model, const PersistentLayout& layout) {
    if (model.persistent_deterministic) return false;
    if (layout.kind == PlacementKind::variability_aware) return true;
    return layout.gpu_of.size() == static_cast<size_t>(layout.job_gpus);
}

double LazyGroupFactors::healthy(double log_p) const {
    return m_.group_factor(0, (*healthy_)(log_p));
}

[[gnu::always_inline]] inline void LazyGroupFactors::leave_pool(int gi) {
    // swap with the last pool entry: pool_list_[0 .. pool_) stays the pool, in some order
    const auto pos = pool_pos_[gi];
    const auto last = pool_list_[pool_ - 1];
    if (n_touched_ + 4 <= touched_.size()) {
        std::int32_t* t = touched_.data() + n_touched_;
        t[0] = pos;
        t[1] = last;
        t[2] = gi;
        t[3] = static_cast<std::int32_t>(pool_ - 1);
        n_touched_ += 4;
    } else {
        scrambled_ = true;  // more than a rebuild costs: rebuild
    }
    pool_list_[pos] = last;
    pool_pos_[last] = pos;
    pool_list_[pool_ - 1] = gi;
    pool_pos_[gi] = static_cast<std::int32_t>(pool_ - 1);
    --pool_;
}

void LazyGroupFactors::set_known(int gi, double g) {
    if (state_[gi] == kPool) leave_pool(gi);
    state_[gi] = kKnown;
    g_[gi] = g;
    revealed_.push_back(gi);
    --unrevealed_;
}

void LazyGroupFactors::reset(const Stream& stream) {
    stream_ = stream;
    std::fill(state_.begin(), state_.end(), kPool);
    // back to the identity (entries not in touched_ still hold it), so that a realization
    // depends on its stream alone, not on the ones drawn before
    if (scrambled_) {
        scrambled_ = false;
        std::iota(pool_list_.begin(), pool_list_.end(), 0);
        std::iota(pool_pos_.begin(), pool_pos_.end(), 0);
    } else {
        for (size_t k = 0; k < n_touched_; ++k) {
            const auto t = touched_[k];
            pool_list_[t] = pool_pos_[t] = t;
        }
    }
    n_touched_ = 0;
    revealed_.clear();
    unrevealed_ = pool_ = groups_;
    log_p_tau_ = 0;
    tau_ = healthy(0.0);
    const int n = l_.group_gpus;
    if (!(m_.slow_probability > 0 && m_.slow_factor != 1.0)) return;
    // groups holding slow GPUs, in subset_ (their factor is drawn below)
    subset_.clear();
    if (l_.kind != PlacementKind::variability_aware) {
        // only the job's units matter, each slow with probability q: ordered placement uses the
        // machine's first job_gpus GPUs, node-random a random set of units independent of
        // which are slow
        draw_slow_units(m_.slow_probability, l_.job_units, stream_, &slow_units_);
        for (const auto u : slow_units_) {
            for (auto i = unit_group_begin_[u]; i < unit_group_begin_[u + 1]; ++i) {
                const auto gi = unit_group_[i];
                if (slow_members_[gi] == 0) subset_.push_back(gi);
                slow_members_[gi] += unit_group_gpus_[i];
            }
        }
    } else {
        // variability-aware: only the machine's slow count matters (persistent.hpp)
        const std::int64_t slow_count =
            draw_slow_units(m_.slow_probability, l_.machine_units, stream_, nullptr);
        const std::int64_t spare = l_.machine_units - l_.job_units;
        std::int64_t slow_gpus = std::max<std::int64_t>(0, slow_count - spare) * l_.unit_gpus;
        for (const auto gi : l_.preference) {
            if (slow_gpus <= 0) break;
            const int k = static_cast<int>(std::min<std::int64_t>(n, slow_gpus));
            slow_members_[gi] = k;
            subset_.push_back(gi);
            slow_gpus -= k;
        }
    }
    for (const auto gi : subset_) {
        set_known(gi, group_factor(m_, slow_members_[gi], n, stream_));
        slow_members_[gi] = 0;
    }
}

void LazyGroupFactors::extend(int k) {
    for (int i = 0; i < k && pool_ > 0; ++i) {
        // the largest of the pool P, iid uniform on (0, p_tau): p_tau U^(1 / count) (ln U = -E,
        // E standard exponential)
        log_p_tau_ -= stream_.exponential() / static_cast<double>(pool_);
        // on a uniformly random pool group: pool_list_[0 .. pool_) holds the pool
        const auto gi = pool_list_[stream_.below(static_cast<std::uint32_t>(pool_))];
        tau_ = healthy(log_p_tau_);
        set_known(gi, tau_);
    }
}

void LazyGroupFactors::cap_top(const std::int32_t* gis, int count, int k) {
    subset_.clear();
    for (int i = 0; i < count; ++i) {
        if (state_[gis[i]] == kPool) subset_.push_back(gis[i]);
    }
    double log_p = log_p_tau_;
    double g = tau_;
    for (int t = 0; t < k && !subset_.empty(); ++t) {
        // the largest of the c remaining P of the subset, iid uniform on (0, p): p U^(1 / c)
        log_p -= stream_.exponential() / static_cast<double>(subset_.size());
        const auto j = stream_.below(static_cast<std::uint32_t>(subset_.size()));
        g = healthy(log_p);
        set_known(subset_[j], g);
        subset_[j] = subset_.back();
        subset_.pop_back();
    }
    for (const auto gi : subset_) {
        state_[gi] = kCapped;
        log_cap_[gi] = log_p;
        cap_[gi] = g;
        leave_pool(gi);
    }
}

void LazyGroupFactors::reveal(int gi) {
    if (state_[gi] == kKnown) return;
    // P uniform on (0, cap)
    const double log_cap = state_[gi] == kCapped ? log_cap_[gi] : log_p_tau_;
    set_known(gi, healthy(log_cap - stream_.exponential()));
}

void LazyGroupFactors::reveal_groups(const std::int32_t* gis, int count) {
    // P uniform on (0, cap), drawn in the order of the calls to reveal()
    batch_gi_.resize(static_cast<size_t>(count));
    std::int32_t* todo = batch_gi_.data();
    int n = 0;
    for (int i = 0; i < count; ++i) {
        if (state_[gis[i]] != kKnown) todo[n++] = gis[i];
    }
    batch_v_.resize(static_cast<size_t>(n));
    double* v = batch_v_.data();
    stream_.exponentials(v, static_cast<size_t>(n));
    const HealthyQuantile& h = *healthy_;
    for (int j = 0; j < n; ++j) {
        const auto gi = todo[j];
        v[j] = m_.group_factor(0, h((state_[gi] == kCapped ? log_cap_[gi] : log_p_tau_) - v[j]));
    }
    // set_known() of each, in order (the same pool moves), without its per-call overhead
    const size_t before = revealed_.size();
    revealed_.resize(before + static_cast<size_t>(n));
    std::int32_t* rev = revealed_.data() + before;
    for (int j = 0; j < n; ++j) {
        const auto gi = todo[j];
        if (state_[gi] == kPool) leave_pool(gi);
        state_[gi] = kKnown;
        g_[gi] = v[j];
        rev[j] = gi;
    }
    unrevealed_ -= n;
}

void LazyGroupFactors::reveal_all() {
    // reveal() in increasing gi, without the pool's bookkeeping (it ends empty; reset restores
    // its lists from scratch); the exponentials first, then the quantiles
    const auto count = static_cast<size_t>(unrevealed_);
    batch_gi_.resize(count);
    batch_v_.resize(count);
    std::int32_t* todo = batch_gi_.data();
    size_t n = 0;
    for (int gi = 0; gi < groups_ && n < count; ++gi) {
        if (state_[gi] != kKnown) todo[n++] = gi;
    }
    double* v = batch_v_.data();
    stream_.exponentials(v, n);
    const HealthyQuantile& h = *healthy_;
    for (size_t j = 0; j < n; ++j) {
        const auto gi = todo[j];
        v[j] = m_.group_factor(0, h((state_[gi] == kCapped ? log_cap_[gi] : log_p_tau_) - v[j]));
    }
    const size_t before = revealed_.size();
    revealed_.resize(before + n);
    std::int32_t* rev = revealed_.data() + before;
    for (size_t j = 0; j < n; ++j) {
        const auto gi = todo[j];
        g_[gi] = v[j];
        state_[gi] = kKnown;
        rev[j] = gi;
    }
    unrevealed_ -= static_cast<std::int64_t>(n);
    pool_ = 0;
    scrambled_ = true;
}

}  // namespace prism::stochastic::detail
