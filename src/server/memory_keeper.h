// Keeps the server's resident memory close to what it uses.
//
// glibc gives each thread that allocates under contention an arena of its
// own (up to 8 per core), and memory freed in an arena goes back to the
// system only from its top. A server whose 16 HTTP threads each build a
// multi-megabyte response (a 10k-job list, a dashboard snapshot) so keeps
// gigabytes it no longer uses. BoundArenas() caps the arenas at two (unless
// MALLOC_ARENA_MAX says otherwise); MemoryKeeper returns free pages of every
// arena to the system every `interval` (malloc_trim).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace headway {

// Before the server starts threads.
void BoundArenas();

class MemoryKeeper {
 public:
  explicit MemoryKeeper(std::chrono::milliseconds interval);
  ~MemoryKeeper();  // stops and joins
  MemoryKeeper(const MemoryKeeper&) = delete;
  MemoryKeeper& operator=(const MemoryKeeper&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace headway
