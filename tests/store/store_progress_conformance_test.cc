// The Store's conformance suite (store_conformance.h), progress and
// metrics: reports appended, folded into series chunks and read back in
// step order on every backend. Instantiated for each backend in
// store_conformance_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "store/sql/open_connection.h"
#include "store/store.h"
#include "store_conformance.h"

namespace headway {
namespace {

TEST_P(StoreConformance, MetricAfterReturnsOnlyLaterPointsInOrder) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  ProgressBatch batch{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step : {5, 1, 3, 9, 7}) {
    ProgressReport r;
    r.step = step;
    r.metrics["loss"] = static_cast<double>(step) / 10;
    batch.reports.push_back(r);
  }
  ASSERT_TRUE(store->AppendProgress({batch}).ok());
  auto after = store->MetricAfter("a", "loss", 3, 2);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 2u);
  EXPECT_EQ((*after)[0].step, 5);
  EXPECT_EQ((*after)[1].step, 7);
  EXPECT_TRUE(store->MetricAfter("a", "loss", 9, 10)->empty());
}

// A step reported again (a retried request, a job resumed from a
// checkpoint) replaces the earlier values, within one commit and across
// commits; many points in one commit all land, non-finite ones included.
TEST_P(StoreConformance, ARepeatedStepReplacesItsValuesAndEveryPointOfABigCommitLands) {
  auto store = Open();
  for (const char* name : {"a", "b"}) {
    Job j = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(j, Submitted(name)).ok());
  }
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.total_steps = 1000;
    r.epoch = step / 100.0;
    r.metrics = {{"loss", loss}, {"lr", 0.5}};
    return r;
  };
  ProgressBatch a{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step = 1; step <= 700; ++step) a.reports.push_back(report(step, 1.0 / step));
  a.reports.push_back(report(5, 42.0));  // the same step again, later in the same commit
  a.reports.push_back(report(6, std::numeric_limits<double>::infinity()));
  ProgressBatch b{"b", {report(5, 1.0)}, FromUnixMillis(1000)};
  ASSERT_TRUE(store->AppendProgress({a, b}).ok());
  ASSERT_TRUE(store->AppendProgress({{"b", {report(5, 2.0)}, FromUnixMillis(2000)}}).ok());

  EXPECT_EQ(*store->CountProgressPoints("a"), 700u * 3);
  auto loss = store->RecentMetric("a", "loss", 1000).value();
  ASSERT_EQ(loss.size(), 700u);
  EXPECT_EQ(loss[4].value, 42.0);
  EXPECT_TRUE(std::isinf(loss[5].value));
  EXPECT_DOUBLE_EQ(loss[699].value, 1.0 / 700);
  EXPECT_EQ(store->RecentSteps("a", 1000).value().size(), 700u);
  EXPECT_EQ(store->RecentMetric("b", "loss", 10).value().at(0).value, 2.0);
  EXPECT_EQ(*store->CountProgressPoints("b"), 3u);
}

// Reports are stored as they come and filed by key later (FoldProgress):
// a read sees every acknowledged report whether filed or not, also after
// reopening, and filing keeps the order they came in.
TEST_P(StoreConformance, ReportsAreReadAtOnceAndFiledLaterInTheOrderTheyCame) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.metrics = {{"loss", loss}};
    return r;
  };
  ProgressBatch first{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step = 1; step <= 10; ++step) first.reports.push_back(report(step, step));
  ASSERT_TRUE(store->AppendProgress({first}).ok());
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 50)}, FromUnixMillis(2000)}}).ok());
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 500)}, FromUnixMillis(3000)}}).ok());

  // A request is filed whole: asking for 3 files the first one's 10.
  EXPECT_EQ(*store->FoldProgress(3), 10u);
  EXPECT_EQ(store->RecentMetric("a", "loss", 100)->at(4).value, 500.0);  // the read filed the rest
  EXPECT_EQ(*store->FoldProgress(100), 0u);
  // Filed or not, a later report of a step replaces the earlier one.
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 5000)}, FromUnixMillis(4000)}}).ok());
  EXPECT_EQ(*store->FoldProgress(100), 1u);
  ASSERT_TRUE(store->AppendProgress({{"a", {report(5, 7)}, FromUnixMillis(5000)}}).ok());
  auto steps = store->RecentSteps("a", 100).value();
  ASSERT_EQ(steps.size(), 10u);
  EXPECT_EQ(steps[4].time, FromUnixMillis(5000));
  EXPECT_EQ(*store->CountProgressPoints("a"), 20u);

  // Unfiled reports are as durable as filed ones.
  ASSERT_TRUE(store->AppendProgress({{"a", {report(11, 11)}, FromUnixMillis(6000)}}).ok());
  store.reset();
  store = Open();
  auto loss = store->RecentMetric("a", "loss", 100).value();
  ASSERT_EQ(loss.size(), 11u);
  EXPECT_EQ(loss[4].value, 7.0);
  EXPECT_EQ(loss[10].value, 11.0);
  EXPECT_EQ(*store->FoldProgress(100), 0u);

  // Many short requests are filed in one call, oldest first.
  for (std::int64_t step = 100; step < 250; ++step) {
    ASSERT_TRUE(store->AppendProgress({{"a", {report(step, step)}, FromUnixMillis(7000)}}).ok());
  }
  EXPECT_EQ(*store->FoldProgress(140), 140u);
  EXPECT_EQ(*store->FoldProgress(1000), 10u);
  EXPECT_EQ(store->RecentMetric("a", "loss", 1).value().at(0).value, 249.0);
}

// One fold files the reports of many jobs, interleaved as they came,
// series by series: within each series the report that came last wins.
TEST_P(StoreConformance, AFoldOfInterleavedJobsKeepsTheLastReportOfEachStep) {
  auto store = Open();
  for (const char* name : {"a", "b"}) {
    Job j = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(j, Submitted(name)).ok());
  }
  auto report = [](std::int64_t step, std::map<std::string, double> metrics) {
    ProgressReport r;
    r.step = step;
    r.metrics = std::move(metrics);
    return r;
  };
  std::int64_t millis = 1000;
  auto append = [&](const std::string& job, ProgressReport r) {
    ASSERT_TRUE(
        store->AppendProgress({{job, {std::move(r)}, FromUnixMillis(millis += 1000)}}).ok());
  };
  append("a", report(1, {{"loss", 1}}));
  append("b", report(1, {{"loss", 10}, {"acc", 0.1}}));
  append("a", report(2, {{"loss", 2}}));
  append("b", report(1, {{"loss", 11}}));  // b's step 1 again: loss replaced, acc kept
  append("a", report(1, {{"loss", 3}, {"acc", 0.3}}));
  append("b", report(2, {{"acc", 0.2}}));
  append("a", report(1, {{"loss", 4}}));
  EXPECT_EQ(*store->FoldProgress(100), 7u);

  auto values = [&](const std::string& job, const std::string& metric) {
    std::vector<std::pair<std::int64_t, double>> out;
    const std::vector<MetricPoint> points = store->RecentMetric(job, metric, 10).value();
    for (const MetricPoint& p : points) {
      out.emplace_back(p.step, p.value);
    }
    return out;
  };
  using Points = std::vector<std::pair<std::int64_t, double>>;
  EXPECT_EQ(values("a", "loss"), (Points{{1, 4}, {2, 2}}));
  EXPECT_EQ(values("a", "acc"), (Points{{1, 0.3}}));
  EXPECT_EQ(values("b", "loss"), (Points{{1, 11}}));
  EXPECT_EQ(values("b", "acc"), (Points{{1, 0.1}, {2, 0.2}}));
  const std::vector<StepPoint> a_steps = store->RecentSteps("a", 10).value();
  ASSERT_EQ(a_steps.size(), 2u);
  EXPECT_EQ(a_steps[0].time, FromUnixMillis(8000));  // step 1's last report
  EXPECT_EQ(a_steps[1].time, FromUnixMillis(4000));
}

// A series is kept in chunks of 128 points: steps that arrive out of
// order, across chunk boundaries, in long and short requests, and steps
// reported again all read back as one series in step order, the last
// report of each step kept, by every read.
TEST_P(StoreConformance, ASeriesOfManyChunksReadsBackInStepOrderWhateverOrderItCameIn) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  // Steps 1..1000 in a fixed shuffle, sent as requests of 1 to 150 reports.
  std::vector<std::int64_t> order(1000);
  for (std::int64_t i = 0; i < 1000; ++i) order[i] = i + 1;
  std::uint64_t seed = 42;
  for (std::size_t i = order.size() - 1; i > 0; --i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(order[i], order[(seed >> 33) % (i + 1)]);
  }
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.time = FromUnixMillis(100000 + step);
    r.metrics = {{"loss", loss}};
    return r;
  };
  std::size_t next = 0;
  for (std::size_t size : {150u, 1u, 70u, 3u, 200u, 64u, 1u, 1u, 10u, 500u}) {
    ProgressBatch batch{"a", {}, FromUnixMillis(1000)};
    for (std::size_t i = 0; i < size && next < order.size(); ++i, ++next) {
      batch.reports.push_back(report(order[next], -1.0));  // replaced below
    }
    ASSERT_TRUE(store->AppendProgress({batch}).ok());
  }
  ASSERT_EQ(next, order.size());
  // Every step again with its final value, newest steps first, short and long.
  ProgressBatch again{"a", {}, FromUnixMillis(1000)};
  for (std::int64_t step = 1000; step >= 1; --step) {
    again.reports.push_back(report(step, step == 500 ? std::nan("") : 1.0 / step));
    if (again.reports.size() == (step > 600 ? 1u : 100u)) {
      ASSERT_TRUE(store->AppendProgress({again}).ok());
      again.reports.clear();
    }
  }
  ASSERT_TRUE(store->AppendProgress({again}).ok() || again.reports.empty());

  const std::vector<StepPoint> steps = store->RecentSteps("a", 5000).value();
  ASSERT_EQ(steps.size(), 1000u);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    ASSERT_EQ(steps[i].step, static_cast<std::int64_t>(i) + 1);
    ASSERT_EQ(steps[i].time, FromUnixMillis(100000 + steps[i].step));
  }
  std::vector<MetricPoint> scanned;
  ASSERT_TRUE(
      store->ScanMetric("a", "loss", [&](const MetricPoint& p) { scanned.push_back(p); }).ok());
  ASSERT_EQ(scanned.size(), 1000u);
  for (const MetricPoint& p : scanned) {
    if (p.step == 500) {
      EXPECT_TRUE(std::isnan(p.value));
    } else {
      ASSERT_EQ(p.value, 1.0 / p.step) << p.step;
    }
  }
  const std::vector<MetricPoint> last = store->RecentMetric("a", "loss", 3).value();
  ASSERT_EQ(last.size(), 3u);
  EXPECT_EQ(last[0].step, 998);
  EXPECT_EQ(last[2].step, 1000);
  const std::vector<MetricPoint> after = store->MetricAfter("a", "loss", 127, 3).value();
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0].step, 128);
  EXPECT_EQ(after[2].step, 130);
  EXPECT_TRUE(store->MetricAfter("a", "loss", 1000, 3).value().empty());
  EXPECT_EQ(store->MetricAfter("a", "loss", -5, 2).value().at(0).step, 1);
  EXPECT_EQ(*store->CountProgressPoints("a"), 2000u);
  EXPECT_EQ(store->StoredSteps("a", {0, 1, 129, 500, 1000, 1001}).value(),
            (std::set<std::int64_t>{1, 129, 500, 1000}));
  EXPECT_EQ(store->MetricNames("a").value(), std::vector<std::string>{"loss"});
}

// A store opened again knows nothing of the series it wrote before: a
// late step filed into the middle of a series, then a step of its newest
// chunk reported again, each stays one point.
TEST_P(StoreConformance, AStoreOpenedAgainFilesIntoTheSeriesItWroteBefore) {
  auto report = [](std::int64_t step, double loss) {
    ProgressReport r;
    r.step = step;
    r.metrics = {{"loss", loss}};
    return r;
  };
  {
    auto store = Open();
    Job a = MakeJob("a");
    ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
    ProgressBatch batch{"a", {}, FromUnixMillis(1000)};
    for (std::int64_t step = 1; step <= 300; ++step) {
      if (step != 50) batch.reports.push_back(report(step, 1.0));
    }
    ASSERT_TRUE(store->AppendProgress({batch}).ok());
  }
  auto store = Open();
  ASSERT_TRUE(store->AppendProgress({{"a", {report(50, 2.0)}, FromUnixMillis(2000)}}).ok());
  ASSERT_EQ(*store->FoldProgress(100), 1u);
  ASSERT_TRUE(store->AppendProgress({{"a", {report(290, 3.0)}, FromUnixMillis(3000)}}).ok());
  ASSERT_EQ(*store->FoldProgress(100), 1u);
  ASSERT_TRUE(store->AppendProgress({{"a", {report(301, 4.0)}, FromUnixMillis(4000)}}).ok());
  const std::vector<MetricPoint> loss = store->RecentMetric("a", "loss", 1000).value();
  ASSERT_EQ(loss.size(), 301u);
  for (std::size_t i = 0; i < loss.size(); ++i) {
    ASSERT_EQ(loss[i].step, static_cast<std::int64_t>(i) + 1);
  }
  EXPECT_EQ(loss[49].value, 2.0);
  EXPECT_EQ(loss[289].value, 3.0);
  EXPECT_EQ(loss[300].value, 4.0);
  EXPECT_EQ(*store->CountProgressPoints("a"), 602u);
}

// One group commit holding short requests (logged, filed later) and long
// ones (filed at once) of the same jobs: each step keeps the value of the
// request that came last, and every short one is stored, however many.
TEST_P(StoreConformance, AGroupOfShortAndLongRequestsKeepsTheLastValueOfEachStep) {
  auto store = Open();
  for (const char* name : {"a", "b"}) {
    Job job = MakeJob(name);
    ASSERT_TRUE(store->CreateJob(job, Submitted(name)).ok());
  }
  auto request = [](const std::string& job, std::int64_t first, std::int64_t count, double loss) {
    ProgressBatch batch{job, {}, FromUnixMillis(1000)};
    for (std::int64_t step = first; step < first + count; ++step) {
      ProgressReport r;
      r.step = step;
      r.metrics = {{"loss", loss}};
      batch.reports.push_back(r);
    }
    return batch;
  };
  std::vector<ProgressBatch> group;
  for (int i = 0; i < 300; ++i) group.push_back(request("b", i, 1, 1.0));  // many short ones
  group.push_back(request("a", 10, 1, 1.0));                               // short, then
  group.push_back(request("a", 0, 100, 2.0));                              // long, over it, then
  group.push_back(request("a", 20, 1, 3.0));                               // short again
  group.push_back(request("b", 250, 100, 4.0));  // long, over some short ones
  ASSERT_TRUE(store->AppendProgress(group).ok());
  const std::vector<MetricPoint> a = store->RecentMetric("a", "loss", 1000).value();
  ASSERT_EQ(a.size(), 100u);
  for (const MetricPoint& p : a) {
    EXPECT_EQ(p.value, p.step == 20 ? 3.0 : 2.0) << "a, step " << p.step;
  }
  const std::vector<MetricPoint> b = store->RecentMetric("b", "loss", 1000).value();
  ASSERT_EQ(b.size(), 350u);
  for (const MetricPoint& p : b) {
    EXPECT_EQ(p.value, p.step >= 250 ? 4.0 : 1.0) << "b, step " << p.step;
  }
}

// Before chunks a store kept a row per point (progress_steps and
// metric_points); opening one moves them into chunks, values exact.
TEST_P(StoreConformance, AStoreWrittenWithARowPerPointKeepsItsProgress) {
  {
    auto store = Open();
    Job a = MakeJob("a");
    ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  }
  {
    auto db = sql::OpenConnection(url_);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    const bool sqlite = GetParam() == "sqlite";
    std::vector<std::string> statements = {
        "DROP TABLE progress_chunks",
        "CREATE TABLE progress_steps (job VARCHAR(255) NOT NULL, step BIGINT NOT NULL, "
        "\"time\" BIGINT NOT NULL, total_steps BIGINT, epoch DOUBLE PRECISION, "
        "total_epochs DOUBLE PRECISION, PRIMARY KEY (job, step))",
        "CREATE TABLE metric_points (job VARCHAR(255) NOT NULL, metric VARCHAR(255) NOT NULL, "
        "step BIGINT NOT NULL, value DOUBLE PRECISION, special VARCHAR(8), "
        "PRIMARY KEY (job, metric, step))",
        sqlite ? "PRAGMA user_version=16" : "DELETE FROM headway_schema WHERE version > 3"};
    for (int step = 1; step <= 200; ++step) {
      const std::string s = std::to_string(step);
      statements.push_back("INSERT INTO progress_steps VALUES ('a', " + s + ", " +
                           std::to_string(5000 + step) + ", 200, NULL, 2.5)");
      statements.push_back("INSERT INTO metric_points VALUES ('a', 'loss', " + s + ", " +
                           (step == 3   ? "NULL, 'nan'"
                            : step == 4 ? "NULL, '-inf'"
                                        : "0.1, NULL") +
                           ")");
    }
    for (const std::string& sql : statements) {
      Status s = (*db)->Exec(sql);
      ASSERT_TRUE(s.ok()) << sql << ": " << s.ToString();
    }
  }
  auto store = Open();
  const std::vector<StepPoint> steps = store->RecentSteps("a", 500).value();
  ASSERT_EQ(steps.size(), 200u);
  EXPECT_EQ(steps[0].time, FromUnixMillis(5001));
  EXPECT_EQ(steps[0].total_steps, 200);
  EXPECT_FALSE(steps[0].epoch);
  EXPECT_EQ(steps[199].total_epochs, 2.5);
  const std::vector<MetricPoint> loss = store->RecentMetric("a", "loss", 500).value();
  ASSERT_EQ(loss.size(), 200u);
  EXPECT_TRUE(std::isnan(loss[2].value));
  EXPECT_EQ(loss[3].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(loss[199].value, 0.1);
  EXPECT_EQ(*store->CountProgressPoints("a"), 400u);
}

// Long requests are filed at once, short ones later; whichever way each
// went, the report that came last is the one kept.
TEST_P(StoreConformance, ShortAndLongRequestsForOneStepKeepTheLastReport) {
  auto store = Open();
  Job a = MakeJob("a");
  ASSERT_TRUE(store->CreateJob(a, Submitted("a")).ok());
  auto batch = [](std::size_t reports, double loss) {
    ProgressBatch b{"a", {}, FromUnixMillis(1000)};
    for (std::size_t i = 0; i < reports; ++i) {
      ProgressReport r;
      r.step = static_cast<std::int64_t>(i) + 5 - (reports > 1 ? 1 : 0);  // step 5 in each
      r.metrics = {{"loss", loss}};
      b.reports.push_back(r);
    }
    return b;
  };
  auto loss_at_5 = [&] {
    const std::vector<MetricPoint> points = store->RecentMetric("a", "loss", 1000).value();
    for (const MetricPoint& p : points) {
      if (p.step == 5) return p.value;
    }
    return -1.0;
  };
  ASSERT_TRUE(store->AppendProgress({batch(1, 1)}).ok());
  ASSERT_TRUE(store->AppendProgress({batch(500, 2)}).ok());
  EXPECT_EQ(loss_at_5(), 2.0);
  ASSERT_TRUE(store->AppendProgress({batch(1, 3)}).ok());
  EXPECT_EQ(loss_at_5(), 3.0);
  // In one commit.
  ASSERT_TRUE(store->AppendProgress({batch(1, 4), batch(500, 5)}).ok());
  EXPECT_EQ(loss_at_5(), 5.0);
  ASSERT_TRUE(store->AppendProgress({batch(1, 6), batch(500, 7), batch(1, 8)}).ok());
  EXPECT_EQ(loss_at_5(), 8.0);
  EXPECT_EQ(*store->CountProgressPoints("a"), 1000u);
}

}  // namespace
}  // namespace headway
