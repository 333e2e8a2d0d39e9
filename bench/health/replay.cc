#include "health/replay.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "health/legacy/health.h"

namespace headway::bench {
namespace {

// One CSV line into fields; double quotes group, "" is a quote.
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

std::optional<double> Cell(const std::vector<std::string>& fields, int column) {
  if (column < 0 || static_cast<std::size_t>(column) >= fields.size() ||
      fields[static_cast<std::size_t>(column)].empty()) {
    return std::nullopt;
  }
  const std::string& text = fields[static_cast<std::size_t>(column)];
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "nan") return NAN;
  if (lower == "inf" || lower == "+inf" || lower == "infinity") return INFINITY;
  if (lower == "-inf" || lower == "-infinity") return -INFINITY;
  std::size_t used = 0;
  double v = std::stod(text, &used);
  if (used != text.size()) throw std::runtime_error("not a number: '" + text + "'");
  return v;
}

std::vector<CurveRow> LoadCurve(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  std::getline(in, line);
  std::map<std::string, int> column;
  auto header = SplitCsv(line);
  for (std::size_t i = 0; i < header.size(); ++i) column[header[i]] = static_cast<int>(i);
  if (!column.count("step") || !column.count("loss")) {
    throw std::runtime_error(path + ": the header needs step and loss");
  }
  auto col = [&](const char* name) { return column.count(name) ? column[name] : -1; };
  std::vector<CurveRow> rows;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    auto f = SplitCsv(line);
    CurveRow r;
    r.step = static_cast<std::int64_t>(Cell(f, col("step")).value_or(0));
    r.time_s = Cell(f, col("time_s")).value_or(static_cast<double>(r.step));
    r.loss = Cell(f, col("loss"));
    r.eval_loss = Cell(f, col("eval_loss"));
    r.grad_norm = Cell(f, col("grad_norm"));
    rows.push_back(r);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const CurveRow& a, const CurveRow& b) { return a.step < b.step; });
  return rows;
}

template <typename T>
std::span<const T> Tail(const std::vector<T>& v, std::size_t n) {
  return std::span<const T>(v).last(std::min(n, v.size()));
}

// What the server keeps of a job (ProgressTracker): 512-report tails.
constexpr std::size_t kTail = 512;

}  // namespace

std::int64_t LabelledRun::Length() const {
  if (total_steps && *total_steps > 0) return *total_steps;
  return rows.empty() ? 1 : std::max<std::int64_t>(1, rows.back().step);
}

std::vector<LabelledRun> LoadRuns(const std::string& dir) {
  std::ifstream in(dir + "/labels.csv");
  if (!in) throw std::runtime_error("cannot read " + dir + "/labels.csv");
  std::string line;
  std::getline(in, line);
  std::map<std::string, int> column;
  auto header = SplitCsv(line);
  for (std::size_t i = 0; i < header.size(); ++i) column[header[i]] = static_cast<int>(i);
  auto text = [&](const std::vector<std::string>& f, const char* name) -> std::string {
    auto it = column.find(name);
    if (it == column.end() || static_cast<std::size_t>(it->second) >= f.size()) return "";
    return f[static_cast<std::size_t>(it->second)];
  };
  auto integer = [&](const std::vector<std::string>& f,
                     const char* name) -> std::optional<std::int64_t> {
    std::string t = text(f, name);
    if (t.empty()) return std::nullopt;
    return static_cast<std::int64_t>(std::stod(t));
  };
  std::vector<LabelledRun> runs;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    auto f = SplitCsv(line);
    LabelledRun run;
    run.name = text(f, "name");
    run.label = text(f, "label");
    run.kind = text(f, "kind");
    run.notes = text(f, "notes");
    run.onset_step = integer(f, "onset_step");
    run.total_steps = integer(f, "total_steps");
    run.rows = LoadCurve(dir + "/curves/" + run.name + ".csv");
    runs.push_back(std::move(run));
  }
  return runs;
}

const char* ClassifierName(Classifier c) {
  switch (c) {
    case Classifier::kCurrent:
      return "current";
    case Classifier::kLegacy:
      return "before";
    case Classifier::kBaseline:
      return "plain";
  }
  return "?";
}

Verdicts Replay(const LabelledRun& run, Classifier classifier, double plateau_window,
                const progress::HealthOptions& options) {
  using progress::Health;
  using progress::MetricSample;
  std::vector<progress::StepSample> steps;
  std::vector<MetricSample> loss, eval, grad;
  progress::LossHistory history(options.sustain_reports);
  progress::HealthConfirmation confirmation;
  std::optional<double> first_loss, min_loss;
  // The plain baseline's state.
  std::optional<double> ema, best_ema, best_objective;
  std::int64_t best_objective_step = 0;
  progress::HealthOptions opts = options;
  opts.plateau_window_steps = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(plateau_window * static_cast<double>(run.Length())));

  Verdicts out;
  std::uint64_t reports = 0;
  for (const CurveRow& r : run.rows) {
    ++reports;
    steps.push_back({r.step, r.time_s});
    if (r.loss) {
      loss.push_back({r.step, *r.loss});
      history.Add(r.step, *r.loss);
      if (std::isfinite(*r.loss)) {
        if (!first_loss) first_loss = *r.loss;
        if (!min_loss || *r.loss < *min_loss) min_loss = *r.loss;
      }
    }
    if (r.eval_loss) eval.push_back({r.step, *r.eval_loss});
    if (r.grad_norm) grad.push_back({r.step, *r.grad_norm});
    const std::vector<MetricSample>& objective = eval.empty() ? loss : eval;
    const char* objective_name = eval.empty() ? "loss" : "eval_loss";

    progress::HealthVerdict verdict;
    switch (classifier) {
      case Classifier::kCurrent: {
        progress::HealthInput in;
        in.now_s = r.time_s;
        in.started_at_s = run.rows.front().time_s;
        in.steps = Tail(steps, 64);
        in.loss = Tail(loss, kTail);
        in.grad_norm = Tail(grad, kTail);
        in.eval_loss = Tail(eval, kTail);
        in.objective = Tail(objective, kTail);
        in.objective_name = objective_name;
        in.last_report_age_s = 0;
        in.loss_history = &history;
        verdict = confirmation.Update(progress::ClassifyHealth(in, opts), reports, r.time_s);
        break;
      }
      case Classifier::kLegacy: {
        legacy::HealthInput in;
        in.now_s = r.time_s;
        in.started_at_s = run.rows.front().time_s;
        in.steps = Tail(steps, 64);
        in.loss = Tail(loss, kTail);
        in.objective = Tail(objective, kTail);
        in.objective_name = objective_name;
        in.first_loss = first_loss;
        in.min_loss = min_loss;
        legacy::HealthOptions lo;
        lo.plateau_window_steps = opts.plateau_window_steps;
        auto v = legacy::ClassifyHealth(in, lo);
        verdict.health = v.health;
        verdict.reason = v.reason;
        break;
      }
      case Classifier::kBaseline: {
        verdict.health = Health::kProgressing;
        if (r.loss && std::isfinite(*r.loss)) {
          ema = ema ? 0.9 * *ema + 0.1 * *r.loss : *r.loss;
          if (!best_ema || *ema < *best_ema) best_ema = ema;
        }
        if (!objective.empty() && std::isfinite(objective.back().value) &&
            (!best_objective || objective.back().value < *best_objective)) {
          best_objective = objective.back().value;
          best_objective_step = objective.back().step;
        }
        if (r.loss && !std::isfinite(*r.loss)) {
          verdict = {Health::kDiverging, "loss is not finite", true, std::nullopt};
        } else if (ema && best_ema && *best_ema > 0 && *ema > 2 * *best_ema) {
          verdict = {Health::kDiverging, "EMA of loss 2x its best", false, std::nullopt};
        } else if (best_objective && r.step - best_objective_step > opts.plateau_window_steps) {
          verdict = {Health::kPlateaued, "no new best in the window", false, std::nullopt};
        }
        break;
      }
    }
    out.after.push_back(verdict.health);
    out.reasons.push_back(verdict.reason);
  }
  return out;
}

RunScore Score(const LabelledRun& run, const Verdicts& verdicts) {
  using progress::Health;
  RunScore s;
  std::optional<Health> previous;
  for (std::size_t i = 0; i < verdicts.after.size(); ++i) {
    const Health h = verdicts.after[i];
    const std::int64_t step = run.rows[i].step;
    if (h == Health::kUnknown) continue;
    if (previous && *previous != h) ++s.flips;
    if (previous || h == Health::kProgressing) previous = h;
    if (h == Health::kDiverging) {
      s.ever_diverging = true;
      if (run.onset_step && step < *run.onset_step) {
        s.diverging_before_onset = true;
      } else if (!s.first_diverging_step) {
        s.first_diverging_step = step;
      }
    }
    if (h == Health::kPlateaued && !s.first_plateau_step) s.first_plateau_step = step;
    if (h == Health::kOverfitting && !s.first_overfit_step) s.first_overfit_step = step;
  }
  return s;
}

Summary Summarize(const std::vector<LabelledRun>& runs, const std::vector<RunScore>& scores) {
  Summary sum;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const LabelledRun& run = runs[i];
    const RunScore& s = scores[i];
    if (run.label == "healthy") {
      ++sum.healthy;
      sum.healthy_ever_diverging += s.ever_diverging ? 1 : 0;
      sum.healthy_flips += s.flips;
      if (s.first_plateau_step &&
          static_cast<double>(*s.first_plateau_step) < 0.8 * static_cast<double>(run.Length())) {
        ++sum.healthy_early_plateau;
      }
      sum.healthy_overfitting += s.first_overfit_step ? 1 : 0;
    } else if (run.label == "diverged") {
      ++sum.diverged;
      sum.diverged_false_early += s.diverging_before_onset ? 1 : 0;
      if (s.first_diverging_step) {
        ++sum.diverged_caught;
        const double delay =
            100.0 * static_cast<double>(*s.first_diverging_step - run.onset_step.value_or(0)) /
            static_cast<double>(run.Length());
        sum.delay_pct.push_back(delay);
        if (delay <= 5.0) ++sum.diverged_caught_in_5pct;
      }
    } else if (run.label == "plateaued") {
      ++sum.plateaued;
      sum.plateaued_caught += s.first_plateau_step ? 1 : 0;
    }
  }
  if (sum.healthy > 0) sum.healthy_flips /= sum.healthy;
  return sum;
}

}  // namespace headway::bench
