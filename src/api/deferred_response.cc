// DeferredResponse (declared in http_server.h): the hand-over of an answer
// from the thread that produces it to the connection that waits for it.
#include "api/http_server.h"

namespace headway::api {

void DeferredResponse::Complete(HttpResponse response) {
  std::lock_guard lock(mu_);
  if (ready_) return;
  ready_ = true;
  answer_ = std::make_unique<HttpResponse>(std::move(response));
  // Woken under the lock: Detach() either ran before (no wake) or waits
  // until the wake has been handed to the connection's executor.
  if (wake_) wake_();
  wake_ = nullptr;
}

bool DeferredResponse::Await(std::function<void()> wake) {
  std::lock_guard lock(mu_);
  if (ready_) return false;
  wake_ = std::move(wake);
  return true;
}

void DeferredResponse::Detach() {
  std::lock_guard lock(mu_);
  wake_ = nullptr;
}

HttpResponse DeferredResponse::Take() {
  std::lock_guard lock(mu_);
  if (!answer_) {
    HttpResponse none;
    none.status = 503;
    none.body = R"({"error":{"code":"Unavailable","message":"no answer was given"}})";
    return none;
  }
  HttpResponse answer = std::move(*answer_);
  answer_.reset();
  return answer;
}

}  // namespace headway::api
