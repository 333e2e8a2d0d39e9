#include "server/control_loop.h"

namespace headway {

void ControlLoop::Run(Duration period, const std::function<void()>& pass) {
  std::unique_lock lock(mu_);
  while (!stopped_) {
    woken_ = false;
    lock.unlock();
    pass();
    lock.lock();
    wake_.wait_for(lock, period, [this] { return stopped_ || woken_; });
  }
}

void ControlLoop::Wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  wake_.notify_all();
}

void ControlLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
}

}  // namespace headway
