#include "explorer/pareto.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "src/common/error.hpp"
#include "tests/explorer/brute_dominance.hpp"

namespace {

using prism::explorer::nondominated_ranks;
using prism::explorer::pareto_front;
using prism::explorer::ParetoArchive;
using Table = std::vector<std::vector<double>>;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

using prism::explorer::truth::brute_dominates;

bool brute_feasible(const std::vector<double>& row) {
    return std::none_of(row.begin(), row.end(), [](double v) { return std::isnan(v); });
}

std::vector<std::size_t> brute_front_of(const Table& values, const std::vector<bool>& maximize,
                                        const std::vector<bool>& alive) {
    std::vector<std::size_t> front;
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!alive[i]) continue;
        bool dominated = false;
        for (std::size_t j = 0; j < values.size() && !dominated; ++j) {
            dominated = alive[j] && brute_dominates(values[j], values[i], maximize);
        }
        if (!dominated) front.push_back(i);
    }
    return front;
}

std::vector<std::size_t> brute_front(const Table& values, const std::vector<bool>& maximize) {
    std::vector<bool> alive(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) alive[i] = brute_feasible(values[i]);
    return brute_front_of(values, maximize, alive);
}

// Peeling: rank r is the front of what is left after removing ranks < r.
std::vector<int> brute_ranks(const Table& values, const std::vector<bool>& maximize) {
    std::vector<int> ranks(values.size(), -1);
    std::vector<bool> alive(values.size());
    std::size_t left = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
        alive[i] = brute_feasible(values[i]);
        left += alive[i] ? 1 : 0;
    }
    for (int rank = 0; left > 0; ++rank) {
        const std::vector<std::size_t> front = brute_front_of(values, maximize, alive);
        for (const std::size_t i : front) {
            ranks[i] = rank;
            alive[i] = false;
        }
        left -= front.size();
    }
    return ranks;
}

// Random rows on a coarse grid so that ties and exact duplicates are common; some NaN.
Table random_table(std::mt19937_64& rng, std::size_t rows, std::size_t objectives, int levels,
                   double nan_fraction) {
    std::uniform_int_distribution<int> level(0, levels - 1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    Table values(rows, std::vector<double>(objectives));
    for (auto& row : values) {
        for (auto& v : row) v = 0.5 * level(rng) - 1.0;
        if (unit(rng) < nan_fraction) row[rng() % objectives] = nan;
    }
    // Copy some earlier rows verbatim: exact duplicates.
    for (std::size_t i = 1; i < rows; i += 7) values[i] = values[rng() % i];
    return values;
}

std::vector<bool> random_directions(std::mt19937_64& rng, std::size_t objectives) {
    std::vector<bool> maximize(objectives);
    for (std::size_t j = 0; j < objectives; ++j) maximize[j] = (rng() & 1U) != 0;
    return maximize;
}

std::vector<std::uint64_t> as_u64(const std::vector<std::size_t>& v) {
    return {v.begin(), v.end()};
}

TEST(ParetoFront, KeepsOnlyNonDominatedPoints) {
    // (time, cost), both minimized: (3,3) is dominated by (2,2); (1,5) and (5,1) are extremes.
    const Table values = {{1, 5}, {2, 2}, {3, 3}, {5, 1}, {4, 4}};

    const auto front = pareto_front(values, {false, false});

    EXPECT_EQ(front, (std::vector<std::size_t>{0, 1, 3}));
}

TEST(ParetoFront, HonoursMaximizedObjectives) {
    // (step time, minimized; MFU, maximized).
    const Table values = {{1.0, 0.30}, {2.0, 0.50}, {2.0, 0.40}, {3.0, 0.45}, {0.5, 0.10}};

    const auto front = pareto_front(values, {false, true});

    EXPECT_EQ(front, (std::vector<std::size_t>{0, 1, 4}));
}

TEST(ParetoFront, KeepsIdenticalVectorsAndSkipsNaN) {
    const Table values = {{1, 1}, {nan, 0}, {1, 1}, {0, nan}, {2, 0}, {2, 0}, {2, 1}};

    const auto front = pareto_front(values, {false, false});

    EXPECT_EQ(front, (std::vector<std::size_t>{0, 2, 4, 5}));
}

TEST(ParetoFront, TreatsInfinitiesAsOrdinaryValues) {
    const Table values = {{inf, 0}, {0, inf}, {1, 1}, {inf, inf}, {-inf, 5}};

    const auto front = pareto_front(values, {false, false});

    EXPECT_EQ(front, (std::vector<std::size_t>{0, 2, 4}));
}

TEST(ParetoFront, HandlesOneObjective) {
    const Table values = {{3}, {1}, {nan}, {1}, {2}};

    EXPECT_EQ(pareto_front(values, {false}), (std::vector<std::size_t>{1, 3}));
    EXPECT_EQ(pareto_front(values, {true}), (std::vector<std::size_t>{0}));
}

TEST(ParetoFront, ReturnsNothingForNoFeasibleRows) {
    EXPECT_TRUE(pareto_front({}, {false, true}).empty());
    EXPECT_TRUE(pareto_front({{nan, 1}, {1, nan}}, {false, true}).empty());
}

TEST(ParetoFront, RejectsRowsOfTheWrongLength) {
    try {
        pareto_front({{1, 2}, {1, 2, 3}}, {false, false});
        FAIL() << "expected prism::Error";
    } catch (const prism::Error& e) {
        EXPECT_STREQ(e.what(), "pareto_front: row 1 has 3 values, expected 2");
    }
    try {
        pareto_front({{1}}, {});
        FAIL() << "expected prism::Error";
    } catch (const prism::Error& e) {
        EXPECT_STREQ(e.what(), "pareto_front: no objectives");
    }
}

TEST(ParetoFront, MatchesBruteForceOnRandomData) {
    std::mt19937_64 rng(20261122);
    for (std::size_t k = 1; k <= 5; ++k) {
        for (int trial = 0; trial < 40; ++trial) {
            const std::size_t rows = 1 + rng() % 300;
            const int levels = trial % 2 == 0 ? 5 : 1000;  // many ties, or few
            const Table values = random_table(rng, rows, k, levels, 0.05);
            const std::vector<bool> maximize = random_directions(rng, k);

            const auto front = pareto_front(values, maximize);

            ASSERT_EQ(front, brute_front(values, maximize)) << "k=" << k << " trial=" << trial;
        }
    }
}

TEST(NondominatedRanks, NumbersSuccessiveLayers) {
    const Table values = {{1, 5}, {2, 2}, {3, 3}, {5, 1}, {4, 4}, {nan, 1}, {5, 5}, {3, 3}};

    const auto ranks = nondominated_ranks(values, {false, false});

    EXPECT_EQ(ranks, (std::vector<int>{0, 0, 1, 0, 2, -1, 3, 1}));
}

TEST(NondominatedRanks, MatchesBruteForcePeelingOnRandomData) {
    std::mt19937_64 rng(7);
    for (std::size_t k = 1; k <= 5; ++k) {
        for (int trial = 0; trial < 30; ++trial) {
            const std::size_t rows = 1 + rng() % 200;
            const int levels = trial % 2 == 0 ? 4 : 50;
            const Table values = random_table(rng, rows, k, levels, 0.05);
            const std::vector<bool> maximize = random_directions(rng, k);

            const auto ranks = nondominated_ranks(values, maximize);

            ASSERT_EQ(ranks, brute_ranks(values, maximize)) << "k=" << k << " trial=" << trial;
        }
    }
}

TEST(ParetoArchive, MatchesBruteForceWhateverTheInsertionOrder) {
    std::mt19937_64 rng(42);
    for (std::size_t k = 2; k <= 5; ++k) {
        for (int trial = 0; trial < 25; ++trial) {
            const std::size_t rows = 1 + rng() % 300;
            const int levels = trial % 2 == 0 ? 5 : 1000;
            const Table values = random_table(rng, rows, k, levels, 0.05);
            const std::vector<bool> maximize = random_directions(rng, k);
            const auto expected = as_u64(brute_front(values, maximize));
            std::vector<std::size_t> order(rows);
            std::iota(order.begin(), order.end(), std::size_t{0});

            for (int shuffle = 0; shuffle < 4; ++shuffle) {
                std::shuffle(order.begin(), order.end(), rng);
                ParetoArchive archive(maximize);
                for (const std::size_t i : order) archive.insert(i, values[i]);

                ASSERT_EQ(archive.indices(), expected)
                    << "k=" << k << " trial=" << trial << " shuffle=" << shuffle;
                ASSERT_EQ(archive.size(), expected.size());
            }
        }
    }
}

TEST(ParetoArchive, ReportsWhetherTheNewRowIsInTheFront) {
    ParetoArchive archive({false, true});

    EXPECT_TRUE(archive.insert(10, std::vector<double>{2.0, 0.5}));
    EXPECT_FALSE(archive.insert(11, std::vector<double>{3.0, 0.4}));  // dominated by 10
    EXPECT_TRUE(archive.insert(12, std::vector<double>{2.0, 0.5}));   // duplicate of 10
    EXPECT_FALSE(archive.insert(13, std::vector<double>{nan, 0.9}));
    EXPECT_TRUE(archive.insert(14, std::vector<double>{1.0, 0.6}));  // evicts 10 and 12

    EXPECT_EQ(archive.indices(), (std::vector<std::uint64_t>{14}));
    EXPECT_EQ(archive.values(), (Table{{1.0, 0.6}}));
}

TEST(ParetoArchive, ReturnsValuesAsInsertedInIndexOrder) {
    ParetoArchive archive({true, false, true});
    archive.insert(7, std::vector<double>{1, 1, 1});
    archive.insert(3, std::vector<double>{2, 2, 0});
    archive.insert(5, std::vector<double>{0, 0, 0});

    const auto indices = archive.indices();
    const auto values = archive.values();

    EXPECT_EQ(indices, (std::vector<std::uint64_t>{3, 5, 7}));
    EXPECT_EQ(values, (Table{{2, 2, 0}, {0, 0, 0}, {1, 1, 1}}));
}

TEST(ParetoArchive, MergingPartialArchivesEqualsOneArchive) {
    std::mt19937_64 rng(99);
    for (std::size_t k = 2; k <= 4; ++k) {
        const Table values = random_table(rng, 400, k, 30, 0.05);
        const std::vector<bool> maximize = random_directions(rng, k);
        std::vector<ParetoArchive> workers(3, ParetoArchive(maximize));
        for (std::size_t i = 0; i < values.size(); ++i) workers[rng() % 3].insert(i, values[i]);

        ParetoArchive merged(maximize);
        for (const auto& w : workers) merged.merge(w);

        EXPECT_EQ(merged.indices(), as_u64(brute_front(values, maximize))) << "k=" << k;
    }
}

TEST(ParetoArchive, RejectsMismatchedObjectives) {
    ParetoArchive a({false, false});
    ParetoArchive b({false, true});

    try {
        a.merge(b);
        FAIL() << "expected prism::Error";
    } catch (const prism::Error& e) {
        EXPECT_STREQ(e.what(), "pareto archive: cannot merge archives with different objectives");
    }
    try {
        a.insert(4, std::vector<double>{1.0});
        FAIL() << "expected prism::Error";
    } catch (const prism::Error& e) {
        EXPECT_STREQ(e.what(), "pareto archive: row 4 has 1 values, expected 2");
    }
}

TEST(ParetoFront, HandlesAMillionRowsWithASmallFront) {
    // Truth by construction: 1000 base points on the plane x + y + z = 1 (nobody on it dominates
    // anybody: a dominator would have a smaller sum); every other row is a base point plus a
    // positive slack in every coordinate, hence dominated by its base.
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const std::size_t rows = 1'000'000;
    const std::size_t bases = 1000;
    Table values(rows, std::vector<double>(3));
    std::vector<std::size_t> expected;
    for (std::size_t i = 0; i < bases; ++i) {
        const double a = unit(rng);
        const double b = unit(rng) * (1.0 - a);
        values[i] = {a, b, 1.0 - a - b};
        expected.push_back(i);
    }
    for (std::size_t i = bases; i < rows; ++i) {
        values[i] = values[rng() % bases];
        for (double& v : values[i]) v += 1e-3 + unit(rng);
    }
    std::vector<std::size_t> order(rows);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    ParetoArchive archive({false, false, false});

    const auto front = pareto_front(values, {false, false, false});
    for (const std::size_t i : order) archive.insert(i, values[i].data());

    EXPECT_EQ(front, expected);
    EXPECT_EQ(archive.indices(), as_u64(expected));
}

}  // namespace
