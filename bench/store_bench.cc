// The store on each backend, side by side in one run: progress ingest as the
// server's writer does it (group commits of many jobs' reports; and one
// report per commit), job listings at 100k jobs, and a whole store copied by
// `headway migrate`. Run through bench/store_bench.sh, which starts real
// PostgreSQL and MariaDB servers on loopback and makes empty databases.
//
//   store_bench --sqlite PATH --postgresql URL --mysql URL [--jobs 100000]
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "store/store.h"

namespace {

using headway::FromUnixMillis;
using headway::Job;
using headway::JobEvent;
using headway::JobFilter;
using headway::ProgressBatch;
using headway::ProgressReport;
using headway::Store;
using Clock = std::chrono::steady_clock;

double Millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

struct Figures {
  double group_points_per_s = 0, group_p50_ms = 0, group_p99_ms = 0, group_filing_s = 0;
  double single_commits_per_s = 0, single_p99_ms = 0;
  double list_all_ms = 0, list_active_ms = 0, list_team_ms = 0, get_job_ms = 0;
  double copy_rows_per_s = 0;
};

std::unique_ptr<Store> Open(const std::string& url) {
  auto store = headway::OpenStore(url);
  if (!store.ok()) {
    std::cerr << "cannot open " << headway::RedactedStoreUrl(url) << ": "
              << store.status().ToString() << "\n";
    std::exit(1);
  }
  return std::move(store.value());
}

Job MakeJob(const std::string& name, const std::string& team) {
  Job job;
  job.spec.name = name;
  job.spec.team = team;
  job.spec.command = {"python", "train.py", "--lr", "0.001"};
  job.spec.labels = {{"project", "bench"}};
  job.created_at = FromUnixMillis(1'000'000);
  return job;
}

void FoldAll(Store& store) {
  for (;;) {
    auto filed = store.FoldProgress(1024);
    if (!filed.ok()) std::cerr << filed.status().ToString() << "\n";
    if (!filed.ok() || *filed == 0) return;
  }
}

// Group commits: each commit holds one report (step + 4 metrics) of each of
// `jobs` jobs, as the ingest writer batches what arrived meanwhile.
void Ingest(Store& store, Figures& f) {
  constexpr int kJobs = 64;
  constexpr int kCommits = 400;
  for (int j = 0; j < kJobs; ++j) {
    Job job = MakeJob("ingest-" + std::to_string(j), "bench");
    (void)store.CreateJob(job, {0, job.name(), FromUnixMillis(1'000'000), "Submitted", ""});
  }
  std::vector<double> latencies;
  std::int64_t points = 0;
  const auto start = Clock::now();
  for (int c = 0; c < kCommits; ++c) {
    std::vector<ProgressBatch> batches;
    for (int j = 0; j < kJobs; ++j) {
      ProgressReport r;
      r.step = c + 1;
      r.total_steps = kCommits;
      r.metrics = {
          {"loss", 1.0 / (c + 1)}, {"lr", 0.001}, {"grad_norm", 0.5}, {"tokens_per_s", 1e5}};
      batches.push_back({"ingest-" + std::to_string(j), {r}, FromUnixMillis(2'000'000 + c)});
      points += 1 + static_cast<std::int64_t>(r.metrics.size());
    }
    const auto t0 = Clock::now();
    if (auto s = store.AppendProgress(batches); !s.ok()) std::cerr << s.ToString() << "\n";
    latencies.push_back(Millis(Clock::now() - t0));
  }
  // Filed by key as well (the server's writer does it between commits), so
  // the rate counts all the work a point costs; the latencies are the
  // acknowledgements'.
  const auto filing_start = Clock::now();
  FoldAll(store);
  f.group_filing_s = Millis(Clock::now() - filing_start) / 1000.0;
  const double seconds = Millis(Clock::now() - start) / 1000.0;
  f.group_points_per_s = static_cast<double>(points) / seconds;
  f.group_p50_ms = Percentile(latencies, 0.50);
  f.group_p99_ms = Percentile(latencies, 0.99);

  // One report per commit: the latency floor of a durable acknowledgement.
  latencies.clear();
  constexpr int kSingles = 300;
  const auto single_start = Clock::now();
  for (int c = 0; c < kSingles; ++c) {
    ProgressReport r;
    r.step = kCommits + c + 1;
    r.metrics = {{"loss", 0.1}};
    const auto t0 = Clock::now();
    (void)store.AppendProgress({{"ingest-0", {r}, FromUnixMillis(3'000'000 + c)}});
    latencies.push_back(Millis(Clock::now() - t0));
  }
  FoldAll(store);
  f.single_commits_per_s = kSingles / (Millis(Clock::now() - single_start) / 1000.0);
  f.single_p99_ms = Percentile(latencies, 0.99);
}

// `jobs` jobs in a SQLite file in one transaction (the Store makes one per
// job, durable each: minutes at 100k). Every 20th is still Queued; five teams.
void FillSqlite(const std::string& path, int jobs) {
  {
    auto store = Open("sqlite://" + path);
    Job job = MakeJob("template", "team-0");
    (void)store->CreateJob(job,
                           {0, "template", FromUnixMillis(1'000'000), "Submitted", "submitted"});
  }
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  const std::string sql =
      "BEGIN;"
      "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < " +
      std::to_string(jobs) +
      ") INSERT INTO jobs (name, team, spec, state, created_at, token_hash, created_by) "
      "SELECT printf('job-%06d', i), 'team-' || (i % 5), "
      "replace(replace(spec, '\"template\"', printf('\"job-%06d\"', i)), '\"team-0\"', "
      "'\"team-' || (i % 5) || '\"'), CASE WHEN i % 20 = 0 THEN 'Queued' ELSE 'Succeeded' END, "
      "created_at + i, '', 'user/bench' FROM n, (SELECT spec, created_at FROM jobs WHERE name = "
      "'template');"
      "INSERT INTO job_events (job, time, type, message) SELECT name, created_at, 'Submitted', "
      "'submitted' FROM jobs WHERE name != 'template';"
      "DELETE FROM jobs WHERE name = 'template';"
      "COMMIT;";
  char* error = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::cerr << "fill: " << (error ? error : "?") << "\n";
    std::exit(1);
  }
  sqlite3_close(db);
}

template <typename F>
double MedianMillis(int runs, F&& f) {
  std::vector<double> v;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    f();
    v.push_back(Millis(Clock::now() - t0));
  }
  return Percentile(v, 0.5);
}

void Listings(Store& store, Figures& f, int jobs) {
  // A server restarted: its first listing parses every spec; later ones hit
  // its spec cache. The median of 5 is what a busy dashboard sees.
  std::size_t listed = 0;
  f.list_all_ms = MedianMillis(5, [&] { listed = store.ListJobs({}).value().size(); });
  if (listed != static_cast<std::size_t>(jobs)) std::cerr << "listed " << listed << " jobs\n";
  JobFilter active;
  active.active_only = true;
  f.list_active_ms = MedianMillis(20, [&] { (void)store.ListJobs(active); });
  JobFilter team;
  team.team = "team-3";
  team.active_only = true;
  f.list_team_ms = MedianMillis(20, [&] { (void)store.ListJobs(team); });
  f.get_job_ms = MedianMillis(200, [&] { (void)store.GetJob("job-050000"); });
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> urls;
  int jobs = 100000;
  std::string sqlite_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sqlite") sqlite_path = argv[i + 1];
    if (flag == "--postgresql") urls["postgresql"] = argv[i + 1];
    if (flag == "--mysql") urls["mysql"] = argv[i + 1];
    if (flag == "--jobs") jobs = std::stoi(argv[i + 1]);
  }
  if (sqlite_path.empty() || urls.size() != 2) {
    std::cerr << "usage: store_bench --sqlite PATH --postgresql URL --mysql URL [--jobs N]\n"
                 "(bench/store_bench.sh starts the servers and runs it)\n";
    return 2;
  }
  const std::vector<std::string> order = {"sqlite", "postgresql", "mysql"};
  std::map<std::string, Figures> figures;

  // The 100k-job store is made in SQLite and copied into each server by
  // `headway migrate`'s copy, which is measured on the way.
  const std::string listing_db = sqlite_path + ".listing";
  std::remove(listing_db.c_str());
  FillSqlite(listing_db, jobs);
  for (const auto& [name, url] : urls) {
    const auto t0 = Clock::now();
    auto copied = headway::CopyStore("sqlite://" + listing_db, url);
    if (!copied.ok()) {
      std::cerr << "copy to " << name << ": " << copied.status().ToString() << "\n";
      return 1;
    }
    std::int64_t rows = 0;
    for (const auto& t : *copied) rows += t.copied;
    figures[name].copy_rows_per_s = static_cast<double>(rows) / (Millis(Clock::now() - t0) / 1000);
  }
  urls["sqlite"] = "sqlite://" + listing_db;
  for (const std::string& name : order) {
    auto store = Open(urls[name]);
    Listings(*store, figures[name], jobs);
    Ingest(*store, figures[name]);
  }

  auto row = [&](const char* label, double Figures::*field, const char* unit) {
    std::printf("%-38s", label);
    for (const std::string& name : order) std::printf("%12.1f", figures[name].*field);
    const double base = figures["sqlite"].*field;
    for (const std::string& name : {std::string("postgresql"), std::string("mysql")}) {
      std::printf("%10.2fx", base > 0 ? figures[name].*field / base : 0.0);
    }
    std::printf("  %s\n", unit);
  };
  std::printf("%-38s%12s%12s%12s%11s%13s\n", "", "SQLite", "PostgreSQL", "MariaDB", "PG/SQLite",
              "Maria/SQLite");
  row("ingest, 64 jobs per commit", &Figures::group_points_per_s, "points/s");
  row("  commit p50", &Figures::group_p50_ms, "ms");
  row("  commit p99", &Figures::group_p99_ms, "ms");
  row("  then filing them by key", &Figures::group_filing_s, "s");
  row("ingest, 1 report per commit", &Figures::single_commits_per_s, "commits/s");
  row("  commit p99", &Figures::single_p99_ms, "ms");
  std::printf("at %d jobs (every 20th queued, 5 teams):\n", jobs);
  row("  list every job", &Figures::list_all_ms, "ms");
  row("  list active jobs (the control loop)", &Figures::list_active_ms, "ms");
  row("  list one team's active jobs", &Figures::list_team_ms, "ms");
  row("  get one job", &Figures::get_job_ms, "ms");
  std::printf("%-38s%12s", "headway migrate from SQLite", "-");
  for (const std::string& name : {std::string("postgresql"), std::string("mysql")}) {
    std::printf("%12.0f", figures[name].copy_rows_per_s);
  }
  std::printf("%22s  rows/s\n", "");
  return 0;
}
