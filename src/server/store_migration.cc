#include "server/store_migration.h"

#include <chrono>
#include <iomanip>

#include "store/store.h"

namespace headway {

int RunStoreMigration(const std::string& from_url, const std::string& to_url, std::ostream& out,
                      std::ostream& err) {
  if (from_url == to_url) {
    err << "error: --from and --to name the same store\n";
    return 2;
  }
  out << "copying " << RedactedStoreUrl(from_url) << " to " << RedactedStoreUrl(to_url) << "\n";
  out << std::left << std::setw(20) << "TABLE" << std::right << std::setw(12) << "ROWS"
      << std::setw(12) << "COPIED"
      << "  SHA256 (BOTH SIDES)\n";
  const auto start = std::chrono::steady_clock::now();
  std::int64_t rows = 0;
  auto copied = CopyStore(from_url, to_url, [&](const StoreTableCopy& t) {
    out << std::left << std::setw(20) << t.table << std::right << std::setw(12) << t.source_rows
        << std::setw(12) << t.copied << "  " << t.checksum.substr(0, 16) << "\n"
        << std::flush;
    rows += t.source_rows;
  });
  if (!copied.ok()) {
    err << "error: " << copied.status().message() << "\n"
        << "nothing was removed; run the same command again to go on from where it stopped\n";
    return 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << "verified: " << copied->size() << " tables, " << rows << " rows, the same on both sides ("
      << std::fixed << std::setprecision(1) << seconds << " s)\n";
  return 0;
}

}  // namespace headway
