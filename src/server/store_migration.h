// `headway migrate --from URL --to URL`: copies a stopped server's store to
// another database (SQLite to PostgreSQL, say) and prints what each table
// holds and its checksum on both sides.
#pragma once

#include <ostream>
#include <string>

namespace headway {

// Returns the process's exit code: 0 when every table matches.
int RunStoreMigration(const std::string& from_url, const std::string& to_url, std::ostream& out,
                      std::ostream& err);

}  // namespace headway
