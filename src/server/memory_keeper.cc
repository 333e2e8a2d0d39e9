#include "server/memory_keeper.h"

#include <malloc.h>

#include <cstdlib>

namespace headway {

void BoundArenas() {
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;  // the operator's choice
  mallopt(M_ARENA_MAX, 2);
}

MemoryKeeper::MemoryKeeper(std::chrono::milliseconds interval)
    : thread_([this, interval] {
        std::unique_lock lock(mu_);
        while (!cv_.wait_for(lock, interval, [this] { return stop_; })) {
          lock.unlock();
          malloc_trim(0);
          lock.lock();
        }
      }) {}

MemoryKeeper::~MemoryKeeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace headway
