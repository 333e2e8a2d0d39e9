// The one periodic loop of the server's controllers: run a pass, then wait a
// period or until woken, until stopped. A controller owns one (or more) and
// exposes RunLoop/Shutdown over it; what a pass does stays the controller's.
//
// Thread safety: every method may be called from any thread; Run runs the
// pass on the calling thread, never under the loop's lock, so a pass may
// call Wake (its own or another loop's) freely.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>

#include "core/time.h"

namespace headway {

class ControlLoop {
 public:
  // Runs `pass` at once, then every `period` (or as soon as Wake is called)
  // until Stop; returns after the pass in progress when Stop came.
  void Run(Duration period, const std::function<void()>& pass);
  // The next pass starts now, or as soon as the one in progress ends.
  void Wake();
  // Ends Run; a later Run returns at once.
  void Stop();

 private:
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;  // guarded by mu_
  bool woken_ = false;    // guarded by mu_
};

}  // namespace headway
