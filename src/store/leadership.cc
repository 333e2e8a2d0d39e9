#include "store/sql/connection.h"
#include "store/sql/open_connection.h"
#include "store/store.h"

namespace headway {
namespace {

class SqlLeadership final : public Leadership {
 public:
  explicit SqlLeadership(std::unique_ptr<sql::Connection> db) : db_(std::move(db)) {}

  Result<bool> TryLead(const std::string& address, Time now) override {
    auto locked = db_->TryLockSession();
    if (!locked.ok() || !*locked) return locked;
    sql::Statement record(*db_, db_->Upsert("server_leader", {"id", "address", "since"}, {"id"},
                                            /*replace=*/true));
    record.Bind(1, 1);
    record.Bind(2, address);
    record.Bind(3, ToUnixMillis(now));
    if (!record.Run()) return Unavailable("record the leader: " + db_->LastError());
    return true;
  }

  Result<bool> StillLeading() override { return db_->SessionLockHeld(); }

  Result<std::string> LeaderAddress() override {
    sql::Statement q(*db_, "SELECT address FROM server_leader WHERE id = 1");
    if (q.Step()) return q.ColumnText(0);
    if (q.failed()) return Unavailable("read the leader: " + db_->LastError());
    return std::string();
  }

 private:
  std::unique_ptr<sql::Connection> db_;
};

}  // namespace

Result<std::unique_ptr<Leadership>> OpenLeadership(const std::string& url) {
  auto connection = sql::OpenConnection(url);
  if (!connection.ok()) return connection.status();
  return std::unique_ptr<Leadership>(
      std::make_unique<SqlLeadership>(std::move(connection.value())));
}

}  // namespace headway
