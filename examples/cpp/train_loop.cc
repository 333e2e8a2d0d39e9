// A C++ "training loop" that reports progress through the header-only SDK:
// gradient descent on a least-squares problem, so the loss really falls.
//   train_loop [steps] [step_delay_ms]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "headway/reporter.hpp"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  const int delay_ms = argc > 2 ? std::atoi(argv[2]) : 0;
  headway::Reporter reporter;
  // Fit w to y = 3x - 1 from 64 points.
  std::vector<double> xs, ys;
  for (int i = 0; i < 64; ++i) {
    double x = i / 64.0;
    xs.push_back(x);
    ys.push_back(3 * x - 1);
  }
  double w = 0, b = 0, lr = 0.5;
  for (int step = 1; step <= steps; ++step) {
    double gw = 0, gb = 0, loss = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      double err = w * xs[i] + b - ys[i];
      loss += err * err;
      gw += 2 * err * xs[i];
      gb += 2 * err;
    }
    double n = static_cast<double>(xs.size());
    loss /= n;
    w -= lr * gw / n;
    b -= lr * gb / n;
    reporter.Report(step, {{"loss", loss}, {"learning_rate", lr}}, steps);
    if (step % 50 == 0) std::printf("step %d loss %.6f\n", step, loss);
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  bool flushed = reporter.Flush(std::chrono::seconds(10));
  std::printf("flushed=%d acknowledged=%llu\n", flushed,
              static_cast<unsigned long long>(reporter.acknowledged()));
  return 0;
}
