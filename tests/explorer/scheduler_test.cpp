#include "explorer/scheduler.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "explorer/messages.hpp"
#include "src/common/error.hpp"

namespace prism::explorer {
namespace {

TEST(ChunkScheduler, CoversTheRangeExactlyOnceInOrder) {
    ChunkScheduler s(100, 10'000, 3);

    std::uint64_t next = 100;
    while (auto c = s.next()) {
        EXPECT_EQ(c->begin, next);
        EXPECT_GT(c->end, c->begin);
        next = c->end;
        s.record(*c, 0.001 * static_cast<double>(c->end - c->begin));
    }

    EXPECT_EQ(next, 10'000u);
}

TEST(ChunkScheduler, GuidedChunksShrinkTowardsTheEnd) {
    SchedulerOptions o;
    o.first_chunk = 1'000'000;  // no time cap: pure guided self-scheduling
    o.max_chunk = 1'000'000;
    ChunkScheduler s(0, 100'000, 4, o);

    std::vector<std::uint64_t> sizes;
    while (auto c = s.next()) sizes.push_back(c->end - c->begin);

    // remaining / (2 * 4): the first is 12500, each later one no larger than the one before.
    EXPECT_EQ(sizes.front(), 12'500u);
    for (std::size_t i = 1; i < sizes.size(); ++i) EXPECT_LE(sizes[i], sizes[i - 1]);
    EXPECT_EQ(sizes.back(), 1u);
}

TEST(ChunkScheduler, CapsChunksToTheTargetTimeAtTheMeasuredRate) {
    SchedulerOptions o;
    o.target_chunk_s = 0.5;
    ChunkScheduler s(0, 1'000'000, 2, o);
    const auto first = s.next();
    ASSERT_TRUE(first);

    s.record(*first, static_cast<double>(first->end - first->begin) / 1000.0);  // 1000 points/s
    const auto second = s.next();

    ASSERT_TRUE(second);
    EXPECT_EQ(second->end - second->begin, 500u);  // 0.5 s at 1000 points/s
}

TEST(ChunkScheduler, HandsOutNothingAfterStop) {
    ChunkScheduler s(0, 1000, 2);
    ASSERT_TRUE(s.next());

    s.stop();

    EXPECT_FALSE(s.next());
    EXPECT_TRUE(s.stopped());
}

TEST(ReorderBuffer, ReleasesChunksOnlyWhenEveryEarlierIndexArrived) {
    ReorderBuffer<int> b(10);

    b.add(20, 30, 2);
    b.add(30, 35, 3);
    EXPECT_FALSE(b.pop());
    b.add(10, 20, 1);

    std::vector<int> order;
    while (auto r = b.pop()) order.push_back(r->second);
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(b.next_index(), 35u);
    EXPECT_EQ(b.pending(), 0u);
}

TEST(Messages, ChunkResultSurvivesSerialization) {
    ChunkResult in;
    in.chunk_id = 7;
    in.begin = 100;
    in.end = 110;
    PointResult r;
    r.index = 103;
    r.status = PointStatus::infeasible;
    r.reason = "memory 91.2 GiB > 80.0 GiB capacity";
    r.values = {1.5, kNaN, -2.0};
    in.rows.push_back(r);
    in.filtered = {{"tp does not divide heads", 4}};
    in.seconds = 0.25;

    ChunkResult out;
    deserialize_message(serialize_message(in), out);

    EXPECT_EQ(out.chunk_id, 7u);
    EXPECT_EQ(out.begin, 100u);
    EXPECT_EQ(out.end, 110u);
    ASSERT_EQ(out.rows.size(), 1u);
    EXPECT_EQ(out.rows[0].index, 103u);
    EXPECT_EQ(out.rows[0].status, PointStatus::infeasible);
    EXPECT_EQ(out.rows[0].reason, r.reason);
    EXPECT_EQ(out.rows[0].values[0], 1.5);
    EXPECT_TRUE(std::isnan(out.rows[0].values[1]));
    EXPECT_EQ(out.filtered, in.filtered);
    EXPECT_EQ(out.seconds, 0.25);
}

TEST(Messages, TruncatedMessageIsAnMpiError) {
    WorkOrder in{1, 2, 3};
    std::string bytes = serialize_message(in);
    bytes.resize(bytes.size() / 2);

    WorkOrder out;
    EXPECT_THROW(deserialize_message(bytes, out), MpiError);
}

}  // namespace
}  // namespace prism::explorer
