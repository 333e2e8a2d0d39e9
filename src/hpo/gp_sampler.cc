// Gaussian-process sampler with expected improvement.
//
// Each suggestion refits from scratch, so the sampler stays stateless: the
// search space is mapped onto a unit cube (numbers to one coordinate each,
// log-scaled where `log`; categories to a one-hot block), a zero-mean GP with
// one Matern 5/2 kernel over the whole cube is fitted to the standardised
// objectives by maximising the marginal likelihood over a fixed grid, and the
// winner is the candidate with the largest expected improvement among random
// points of the cube plus perturbations of the best observations.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hpo/internal/samplers.h"

namespace headway::hpo::internal {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;

// The startup draws use streams 0..k, one per parameter position, exactly as
// the random sampler does, so gp, tpe and random agree on the startup trials
// of a seed and comparisons between them start from the same points. The
// model's own draws stay well clear of those streams.
constexpr std::uint64_t kCandidateStream = std::uint64_t{1} << 33;
constexpr std::uint64_t kPerturbationStream = kCandidateStream + 1;

constexpr int kRandomCandidates = 1000;
constexpr std::size_t kLocalCentres = 5;
constexpr int kPerturbationsPerCentre = 20;
constexpr double kPerturbationSigma = 0.05;  // in unit-cube coordinates
constexpr double kCategoryFlipProbability = 0.2;

// The fit is O(n^3) per grid point; past this many observations the model
// keeps a fixed subset (see SelectModelPoints) to bound the cost of a call.
constexpr std::size_t kMaxModelPoints = 200;
constexpr std::size_t kKeptBest = kMaxModelPoints / 2;

// Hyperparameter grid. Lengthscales are multiplied by sqrt(dims): distances
// between random points of a cube grow like sqrt(dims), and an unscaled
// grid would only offer lengthscales far below the spacing of the data in
// higher-dimensional spaces. Noise is relative to the signal variance, which
// is profiled out in closed form (and then clamped) instead of gridded.
constexpr double kLengthscales[] = {0.05, 0.1, 0.2, 0.4, 0.8, 1.6};
constexpr double kNoiseRatios[] = {1e-6, 1e-4, 1e-2, 1e-1};
constexpr double kMinSignal = 1e-2;  // objectives are standardised: variance 1 is the norm
constexpr double kMaxSignal = 1e2;
// Added to the diagonal, in turn, when a matrix is numerically not positive
// definite (duplicated points with a tiny noise ratio).
constexpr double kJitters[] = {1e-9, 1e-7, 1e-5, 1e-3};

// ---- Encoding: parameters to the unit cube and back.

// How one parameter maps onto its coordinates of the unit cube.
class Axis {
 public:
  enum class Kind {
    kFixed,        // one possible value (or none): no coordinate, nothing to model
    kNumeric,      // one coordinate in [0, 1]
    kCategorical,  // a one-hot block, one coordinate per category
  };

  static Axis For(const ParamSpec& param) {
    Axis axis;
    axis.type_ = param.type;
    axis.log_ = param.log && param.min > 0;  // as DrawUniform: no log scale without min > 0
    switch (param.type) {
      case ParamType::kDouble:
        if (!(param.min < param.max)) return axis;
        axis.kind_ = Kind::kNumeric;
        axis.min_ = param.min;
        axis.max_ = param.max;
        axis.low_ = axis.log_ ? std::log(param.min) : param.min;
        axis.high_ = axis.log_ ? std::log(param.max) : param.max;
        break;
      case ParamType::kInt:
        axis.min_ = std::ceil(param.min);
        axis.max_ = std::floor(param.max);
        if (!(axis.min_ < axis.max_)) return axis;
        axis.kind_ = Kind::kNumeric;
        // Every integer owns [k - 0.5, k + 0.5], so the end points get full
        // cells and random candidates hit every integer about equally often.
        axis.low_ = axis.log_ ? std::log(axis.min_ - 0.5) : axis.min_ - 0.5;
        axis.high_ = axis.log_ ? std::log(axis.max_ + 0.5) : axis.max_ + 0.5;
        break;
      case ParamType::kDiscrete: {
        // Non-finite values cannot be placed on the line (and NaN would break
        // the sort); DrawUniform may still pick one for a space of nothing else.
        std::copy_if(param.values.begin(), param.values.end(), std::back_inserter(axis.values_),
                     [](double v) { return std::isfinite(v); });
        std::sort(axis.values_.begin(), axis.values_.end());
        axis.values_.erase(std::unique(axis.values_.begin(), axis.values_.end()),
                           axis.values_.end());
        const std::vector<double>& v = axis.values_;
        if (v.size() < 2) return axis;
        axis.kind_ = Kind::kNumeric;
        // Positions follow the values (the type is ordered numbers); each
        // value owns the stretch up to the midpoints with its neighbours.
        axis.low_ = v[0] - 0.5 * (v[1] - v[0]);
        axis.high_ = v.back() + 0.5 * (v.back() - v[v.size() - 2]);
        break;
      }
      case ParamType::kCategorical:
        if (param.categories.size() < 2) return axis;
        axis.kind_ = Kind::kCategorical;
        axis.categories_ = &param.categories;
        return axis;
    }
    // Infinite or overflowing bounds leave no line to map onto [0, 1]; such a
    // parameter is left to DrawUniform, like a single-valued one.
    if (!std::isfinite(axis.high_ - axis.low_)) axis.kind_ = Kind::kFixed;
    return axis;
  }

  Kind kind() const { return kind_; }

  std::size_t width() const {
    switch (kind_) {
      case Kind::kFixed:
        return 0;
      case Kind::kNumeric:
        return 1;
      case Kind::kCategorical:
        return categories_->size();
    }
    return 0;
  }

  // Writes where `value` sits into x[0, width()); false for a value this
  // parameter cannot take (e.g. the space changed since that trial ran).
  bool Encode(const ParamValue& value, double* x) const {
    if (kind_ == Kind::kFixed) return true;
    if (kind_ == Kind::kCategorical) {
      const auto* s = std::get_if<std::string>(&value);
      if (s == nullptr) return false;
      auto it = std::find(categories_->begin(), categories_->end(), *s);
      if (it == categories_->end()) return false;
      const std::size_t index = it - categories_->begin();
      for (std::size_t c = 0; c < categories_->size(); ++c) x[c] = c == index ? 1.0 : 0.0;
      return true;
    }
    const auto* v = std::get_if<double>(&value);
    if (v == nullptr || !std::isfinite(*v)) return false;
    if (type_ == ParamType::kDiscrete) {
      if (!std::binary_search(values_.begin(), values_.end(), *v)) return false;
    } else if (*v < min_ || *v > max_) {
      return false;
    }
    x[0] = ToUnit(*v);
    return true;
  }

  // Moves x[0, width()) onto the nearest point that stands for a valid value,
  // so candidates are scored where the trial would actually run.
  void Snap(double* x) const {
    switch (kind_) {
      case Kind::kFixed:
        return;
      case Kind::kNumeric:
        x[0] = std::clamp(x[0], 0.0, 1.0);
        if (type_ != ParamType::kDouble) x[0] = ToUnit(NumericValue(x[0]));
        return;
      case Kind::kCategorical: {
        const std::size_t index = CategoryIndex(x);
        for (std::size_t c = 0; c < categories_->size(); ++c) x[c] = c == index ? 1.0 : 0.0;
        return;
      }
    }
  }

  // The value at x[0, width()); not for kFixed.
  ParamValue Decode(const double* x) const {
    if (kind_ == Kind::kCategorical) return (*categories_)[CategoryIndex(x)];
    return NumericValue(std::clamp(x[0], 0.0, 1.0));
  }

 private:
  double ToUnit(double v) const {
    const double t = log_ && type_ != ParamType::kDiscrete ? std::log(v) : v;
    return std::clamp((t - low_) / (high_ - low_), 0.0, 1.0);
  }

  double NumericValue(double u) const {
    const double t = low_ + u * (high_ - low_);
    switch (type_) {
      case ParamType::kDouble:
        // exp/log rounding can step just outside the bounds.
        return std::clamp(log_ ? std::exp(t) : t, min_, max_);
      case ParamType::kInt:
        return std::clamp(std::round(log_ ? std::exp(t) : t), min_, max_);
      case ParamType::kDiscrete: {
        const std::vector<double>& v = values_;
        // The nearest value; a midpoint goes to the lower one.
        std::size_t i = std::lower_bound(v.begin(), v.end(), t) - v.begin();
        if (i == v.size() || (i > 0 && t - v[i - 1] <= v[i] - t)) --i;
        return v[i];
      }
      case ParamType::kCategorical:
        break;
    }
    return t;
  }

  std::size_t CategoryIndex(const double* x) const {
    // The first largest coordinate, so ties resolve the same way everywhere.
    return std::max_element(x, x + categories_->size()) - x;
  }

  Kind kind_ = Kind::kFixed;
  ParamType type_ = ParamType::kDouble;
  bool log_ = false;
  double min_ = 0;  // the values' bounds (kDouble, kInt)
  double max_ = 0;
  double low_ = 0;  // the bounds of the line mapped onto [0, 1]
  double high_ = 1;
  std::vector<double> values_;                            // kDiscrete: sorted, unique
  const std::vector<std::string>* categories_ = nullptr;  // kCategorical: the spec's list
};

// The whole space's cube: the axes side by side, in the space's order.
class Encoding {
 public:
  explicit Encoding(const SearchSpace& space) {
    axes_.reserve(space.size());
    offsets_.reserve(space.size());
    for (const ParamSpec& param : space) {
      axes_.push_back(Axis::For(param));
      offsets_.push_back(dims_);
      dims_ += axes_.back().width();
    }
  }

  std::size_t size() const { return axes_.size(); }  // parameters
  std::size_t dims() const { return dims_; }         // coordinates
  const Axis& axis(std::size_t k) const { return axes_[k]; }
  std::size_t offset(std::size_t k) const { return offsets_[k]; }

  bool Encode(const SearchSpace& space, const Assignment& a, double* x) const {
    for (std::size_t k = 0; k < axes_.size(); ++k) {
      if (axes_[k].kind() == Axis::Kind::kFixed) continue;  // whatever it was, it is moot now
      auto it = a.find(space[k].name);
      if (it == a.end() || !axes_[k].Encode(it->second, x + offsets_[k])) return false;
    }
    return true;
  }

  void Snap(double* x) const {
    for (std::size_t k = 0; k < axes_.size(); ++k) axes_[k].Snap(x + offsets_[k]);
  }

 private:
  std::vector<Axis> axes_;
  std::vector<std::size_t> offsets_;
  std::size_t dims_ = 0;
};

// ---- Small dense linear algebra (row-major n x n).

// In-place Cholesky factor (lower triangle) of a symmetric matrix; false when
// a pivot is not positive (or NaN), i.e. numerically not positive definite.
bool Cholesky(std::vector<double>& a, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    double* row_j = &a[j * n];
    double d = row_j[j];
    for (std::size_t k = 0; k < j; ++k) d -= row_j[k] * row_j[k];
    if (!(d > 0)) return false;
    const double pivot = std::sqrt(d);
    row_j[j] = pivot;
    for (std::size_t i = j + 1; i < n; ++i) {
      double* row_i = &a[i * n];
      double s = row_i[j];
      for (std::size_t k = 0; k < j; ++k) s -= row_i[k] * row_j[k];
      row_i[j] = s / pivot;
    }
  }
  return true;
}

// Solves L v = b in place (L lower triangular).
void ForwardSolve(const std::vector<double>& l, std::size_t n, double* b) {
  for (std::size_t i = 0; i < n; ++i) {
    const double* row = &l[i * n];
    double s = b[i];
    for (std::size_t k = 0; k < i; ++k) s -= row[k] * b[k];
    b[i] = s / row[i];
  }
}

// Solves L^T x = b in place.
void BackwardSolve(const std::vector<double>& l, std::size_t n, double* b) {
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * b[k];
    b[i] = s / l[i * n + i];
  }
}

double Matern52(double r) {
  const double s = kSqrt5 * r;
  return (1 + s + s * s / 3) * std::exp(-s);
}

double Distance(const double* a, const double* b, std::size_t d) {
  double s = 0;
  for (std::size_t j = 0; j < d; ++j) {
    const double t = a[j] - b[j];
    s += t * t;
  }
  return std::sqrt(s);
}

// ---- The Gaussian process.

// A GP fitted to n points of the d-dimensional cube. The kernel is
// signal * (Matern52(r / lengthscale) + noise_ratio * [same point]).
class Gp {
 public:
  // nullopt when no grid point gives a factorable matrix; `y` standardised.
  static std::optional<Gp> Fit(const std::vector<double>& x, std::size_t n, std::size_t d,
                               const std::vector<double>& y) {
    std::vector<double> dist(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        dist[i * n + j] = dist[j * n + i] = Distance(&x[i * d], &x[j * d], d);
      }
    }
    const double scale = std::sqrt(static_cast<double>(d));
    std::optional<Gp> best;
    double best_score = -kInf;
    std::vector<double> correlation(n * n);
    std::vector<double> a;
    std::vector<double> alpha(n);
    for (double base : kLengthscales) {
      const double lengthscale = base * scale;
      for (std::size_t i = 0; i < n * n; ++i) correlation[i] = Matern52(dist[i] / lengthscale);
      for (double noise : kNoiseRatios) {
        // Jitter only where the plain matrix fails; the likelihood below is
        // of the matrix actually factored, so the comparison stays honest.
        bool factored = false;
        for (std::size_t attempt = 0; attempt <= std::size(kJitters) && !factored; ++attempt) {
          const double extra = attempt == 0 ? 0.0 : kJitters[attempt - 1];
          a = correlation;
          for (std::size_t i = 0; i < n; ++i) a[i * n + i] += noise + extra;
          factored = Cholesky(a, n);
        }
        if (!factored) continue;
        alpha = y;
        ForwardSolve(a, n, alpha.data());
        BackwardSolve(a, n, alpha.data());
        double quad = 0;
        double log_det = 0;
        for (std::size_t i = 0; i < n; ++i) {
          quad += y[i] * alpha[i];
          log_det += 2 * std::log(a[i * n + i]);
        }
        // The signal variance maximising the likelihood is quad / n; clamped,
        // because all-equal objectives would drive it to zero.
        const double nd = static_cast<double>(n);
        const double signal = std::clamp(quad / nd, kMinSignal, kMaxSignal);
        const double score = -0.5 * quad / signal - 0.5 * nd * std::log(signal) - 0.5 * log_det;
        if (std::isfinite(score) && score > best_score) {  // the first of equal scores wins
          best_score = score;
          best = Gp(x, n, d, std::move(a), alpha, lengthscale, signal);
          a = {};
        }
      }
    }
    return best;
  }

  // Posterior mean and variance of the latent function at c (standardised
  // units). `work` is scratch space, reused across calls to avoid allocations.
  void Predict(const double* c, std::vector<double>& work, double& mean, double& variance) const {
    work.resize(n_);
    mean = 0;
    for (std::size_t i = 0; i < n_; ++i) {
      work[i] = Matern52(Distance(c, &x_[i * d_], d_) / lengthscale_);
      mean += work[i] * alpha_[i];
    }
    ForwardSolve(chol_, n_, work.data());
    double explained = 0;
    for (std::size_t i = 0; i < n_; ++i) explained += work[i] * work[i];
    variance = signal_ * std::max(0.0, 1.0 - explained);
  }

 private:
  Gp(const std::vector<double>& x, std::size_t n, std::size_t d, std::vector<double> chol,
     std::vector<double> alpha, double lengthscale, double signal)
      : x_(x),
        n_(n),
        d_(d),
        chol_(std::move(chol)),
        alpha_(std::move(alpha)),
        lengthscale_(lengthscale),
        signal_(signal) {}

  std::vector<double> x_;
  std::size_t n_;
  std::size_t d_;
  std::vector<double> chol_;   // of correlation + noise (unit signal)
  std::vector<double> alpha_;  // (correlation + noise)^-1 y: the mean needs no signal factor
  double lengthscale_;
  double signal_;
};

// log(z * Phi(z) + phi(z)): the expected improvement of a unit normal over
// z. In log space so that candidates far worse than the best still rank by
// how far, instead of all underflowing to an EI of zero.
double LogUnitImprovement(double z) {
  if (z > -5) {
    // Cancellation here costs at most about two digits.
    const double cdf = 0.5 * std::erfc(-z * kSqrtHalf);
    const double pdf = std::exp(-0.5 * z * z - kLogSqrt2Pi);
    return std::log(z * cdf + pdf);
  }
  // With t = -z and the Mills ratio R = Phi(-t) / phi(t): the value is
  // phi(t) * (1 - t R) = phi(t) * R * c with c = 1/R - t. Laplace's continued
  // fraction 1/R = t + 1/(t + 2/(t + 3/...)) gives c = 1/f, f = t + 2/(t + ...),
  // without the cancellation of 1 - t R. For t >= 5, 40 terms are exact.
  const double t = -z;
  double f = t;
  for (int k = 40; k >= 2; --k) f = t + k / f;
  const double c = 1 / f;
  return -0.5 * t * t - kLogSqrt2Pi - std::log(t + c) - std::log(f);
}

// log EI of minimising below `best` for f ~ N(mean, variance).
double LogExpectedImprovement(double mean, double variance, double best) {
  const double sd = std::sqrt(variance);
  if (!(sd > 1e-12)) {
    const double gap = best - mean;
    return gap > 0 ? std::log(gap) : -kInf;
  }
  return std::log(sd) + LogUnitImprovement((best - mean) / sd);
}

// ---- Draws.

// A standard normal by Box-Muller (one of the pair; the other is dropped so
// that every draw uses a fixed two steps of the stream).
double NextNormal(std::uint64_t& state) {
  const double u1 = 1.0 - NextUnit(state);  // (0, 1]: the log stays finite
  const double u2 = NextUnit(state);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::size_t NextIndex(std::size_t n, std::uint64_t& state) {
  auto i = static_cast<std::size_t>(NextUnit(state) * static_cast<double>(n));
  return std::min(i, n - 1);  // guards the rounding of u * n up to n
}

// Folds x back into [0, 1] by reflection at the faces, so a perturbation
// near a face does not pile up exactly on it.
double Reflect(double x) {
  x = std::fmod(std::fabs(x), 2.0);
  return x > 1 ? 2 - x : x;
}

// ---- The sampler.

struct ModelPoint {
  double objective;
  std::vector<double> x;
};

// Usable observations (completed or pruned, finite objective, every modelled
// parameter valid in `space`), sorted by objective and then position: the
// history may come in any order, and sorting makes the fit's floating-point
// sums, and so the suggestion, independent of that order.
std::vector<ModelPoint> ModelPoints(const SearchSpace& space, const Encoding& encoding,
                                    std::span<const Observation> history) {
  std::vector<ModelPoint> points;
  for (const Observation& obs : history) {
    if (obs.outcome == TrialOutcome::kFailed || !obs.objective || !std::isfinite(*obs.objective)) {
      continue;
    }
    ModelPoint p{*obs.objective, std::vector<double>(encoding.dims())};
    if (encoding.Encode(space, obs.params, p.x.data())) points.push_back(std::move(p));
  }
  std::sort(points.begin(), points.end(), [](const ModelPoint& a, const ModelPoint& b) {
    if (a.objective != b.objective) return a.objective < b.objective;
    return a.x < b.x;
  });
  return points;
}

// At most kMaxModelPoints of the sorted points: the best kKeptBest, where the
// optimum is being sought, plus an even spread by rank over the rest, so the
// model still knows where the bad regions are.
void SelectModelPoints(std::vector<ModelPoint>& points) {
  if (points.size() <= kMaxModelPoints) return;
  const std::size_t rest = points.size() - kKeptBest;
  const std::size_t spread = kMaxModelPoints - kKeptBest;
  std::vector<ModelPoint> kept;
  kept.reserve(kMaxModelPoints);
  for (std::size_t i = 0; i < kKeptBest; ++i) kept.push_back(std::move(points[i]));
  for (std::size_t i = 0; i < spread; ++i) {
    kept.push_back(std::move(points[kKeptBest + i * rest / spread]));
  }
  points = std::move(kept);
}

class GpSampler final : public Sampler {
 public:
  explicit GpSampler(const SamplerOptions& options)
      : seed_(options.seed), startup_trials_(options.startup_trials) {}

  Assignment Suggest(const SearchSpace& space, std::span<const Observation> history,
                     std::int64_t trial_index) const override {
    const Encoding encoding(space);
    std::vector<ModelPoint> points = ModelPoints(space, encoding, history);
    if (points.empty() || static_cast<std::int64_t>(points.size()) < startup_trials_ ||
        encoding.dims() == 0) {
      return RandomAssignment(space, trial_index);
    }
    SelectModelPoints(points);
    const std::size_t n = points.size();
    const std::size_t d = encoding.dims();

    std::vector<double> x(n * d);
    std::vector<double> y(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::copy(points[i].x.begin(), points[i].x.end(), x.data() + i * d);
      y[i] = points[i].objective;
    }
    Standardise(y);
    const double best_y = *std::min_element(y.begin(), y.end());

    const std::vector<double> candidates = Candidates(encoding, points, trial_index);
    const std::size_t m = candidates.size() / d;
    const std::optional<Gp> gp = Gp::Fit(x, n, d, y);
    if (!gp) return Decode(space, encoding, &candidates[0], trial_index);  // a random point

    // The EI argmax; failing that (no finite EI anywhere), the lowest mean.
    std::size_t best_ei = m;
    double best_log_ei = -kInf;
    std::size_t best_mean = m;
    double lowest_mean = kInf;
    std::vector<double> work;
    for (std::size_t c = 0; c < m; ++c) {
      double mean = 0;
      double variance = 0;
      gp->Predict(&candidates[c * d], work, mean, variance);
      const double log_ei = LogExpectedImprovement(mean, variance, best_y);
      if (log_ei > best_log_ei) {  // false for NaN; the first of equal scores wins
        best_log_ei = log_ei;
        best_ei = c;
      }
      if (mean < lowest_mean) {
        lowest_mean = mean;
        best_mean = c;
      }
    }
    const std::size_t chosen = best_ei < m ? best_ei : best_mean < m ? best_mean : 0;
    return Decode(space, encoding, &candidates[chosen * d], trial_index);
  }

 private:
  // What the random sampler would suggest: one stream per parameter position.
  Assignment RandomAssignment(const SearchSpace& space, std::int64_t trial_index) const {
    Assignment a;
    for (std::size_t k = 0; k < space.size(); ++k) {
      std::uint64_t state = MixSeed(seed_, trial_index, k);
      a[space[k].name] = DrawUniform(space[k], state);
    }
    return a;
  }

  Assignment Decode(const SearchSpace& space, const Encoding& encoding, const double* x,
                    std::int64_t trial_index) const {
    Assignment a;
    for (std::size_t k = 0; k < space.size(); ++k) {
      const Axis& axis = encoding.axis(k);
      if (axis.kind() == Axis::Kind::kFixed) {
        // The only value there is (or, for an empty spec, DrawUniform's stand-in).
        std::uint64_t state = MixSeed(seed_, trial_index, k);
        a[space[k].name] = DrawUniform(space[k], state);
      } else {
        a[space[k].name] = axis.Decode(x + encoding.offset(k));
      }
    }
    return a;
  }

  // Objectives to mean 0, standard deviation 1; all zeros when they do not
  // vary (beyond rounding), which the fit and EI handle like any other data.
  static void Standardise(std::vector<double>& y) {
    // Dividing by the largest magnitude first keeps the sums below finite for
    // objectives near the double range; the result does not depend on it.
    double magnitude = 0;
    for (double v : y) magnitude = std::max(magnitude, std::fabs(v));
    if (magnitude > 0) {
      for (double& v : y) v /= magnitude;
    }
    const double n = static_cast<double>(y.size());
    double mean = 0;
    for (double v : y) mean += v;
    mean /= n;
    double var = 0;
    for (double v : y) var += (v - mean) * (v - mean);
    const double sd = std::sqrt(var / n);
    const bool constant = !(sd > 1e-12 * std::max(1.0, std::fabs(mean)));
    for (double& v : y) v = constant ? 0.0 : (v - mean) / sd;
  }

  // Flat m x d: kRandomCandidates uniform points of the cube, then
  // kPerturbationsPerCentre Gaussian perturbations of each of the best
  // kLocalCentres distinct observed points; all snapped to valid values.
  std::vector<double> Candidates(const Encoding& encoding, const std::vector<ModelPoint>& points,
                                 std::int64_t trial_index) const {
    const std::size_t d = encoding.dims();
    std::vector<const std::vector<double>*> centres;
    for (const ModelPoint& p : points) {  // sorted best first
      if (centres.size() == kLocalCentres) break;
      if (std::none_of(centres.begin(), centres.end(),
                       [&](const std::vector<double>* c) { return *c == p.x; })) {
        centres.push_back(&p.x);
      }
    }
    std::vector<double> out;
    out.reserve((kRandomCandidates + centres.size() * kPerturbationsPerCentre) * d);

    std::uint64_t state = MixSeed(seed_, trial_index, kCandidateStream);
    std::vector<double> c(d);
    for (int i = 0; i < kRandomCandidates; ++i) {
      for (std::size_t k = 0; k < encoding.size(); ++k) {
        const Axis& axis = encoding.axis(k);
        double* block = c.data() + encoding.offset(k);
        if (axis.kind() == Axis::Kind::kNumeric) {
          block[0] = NextUnit(state);
        } else if (axis.kind() == Axis::Kind::kCategorical) {
          const std::size_t pick = NextIndex(axis.width(), state);
          for (std::size_t j = 0; j < axis.width(); ++j) block[j] = j == pick ? 1.0 : 0.0;
        }
      }
      encoding.Snap(c.data());
      out.insert(out.end(), c.begin(), c.end());
    }

    state = MixSeed(seed_, trial_index, kPerturbationStream);
    for (const std::vector<double>* centre : centres) {
      for (int i = 0; i < kPerturbationsPerCentre; ++i) {
        c = *centre;
        for (std::size_t k = 0; k < encoding.size(); ++k) {
          const Axis& axis = encoding.axis(k);
          double* block = c.data() + encoding.offset(k);
          if (axis.kind() == Axis::Kind::kNumeric) {
            block[0] = Reflect(block[0] + kPerturbationSigma * NextNormal(state));
          } else if (axis.kind() == Axis::Kind::kCategorical &&
                     NextUnit(state) < kCategoryFlipProbability) {
            const std::size_t pick = NextIndex(axis.width(), state);
            for (std::size_t j = 0; j < axis.width(); ++j) block[j] = j == pick ? 1.0 : 0.0;
          }
        }
        encoding.Snap(c.data());
        out.insert(out.end(), c.begin(), c.end());
      }
    }
    return out;
  }

  static std::size_t encoding_size(const Encoding& encoding);

  std::uint64_t seed_;
  std::int64_t startup_trials_;
};

}  // namespace

std::unique_ptr<Sampler> MakeGpSampler(const SamplerOptions& options) {
  return std::make_unique<GpSampler>(options);
}

}  // namespace headway::hpo::internal
