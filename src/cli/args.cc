#include "cli/args.h"

#include <algorithm>
#include <iostream>
#include <sstream>

namespace headway::cli {

const std::vector<std::string>& GlobalValueFlags() {
  static const std::vector<std::string> kFlags = {"--server", "--token", "--cacert", "--config"};
  return kFlags;
}

std::vector<std::string> HoistGlobalFlags(const std::vector<std::string>& args,
                                          const std::vector<std::string>& value_flags) {
  std::vector<std::string> global, rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    bool taken = false;
    for (const auto& flag : value_flags) {
      if (arg == flag && i + 1 < args.size()) {
        global.push_back(arg);
        global.push_back(args[++i]);
        taken = true;
        break;
      }
      if (arg.size() > flag.size() && arg.compare(0, flag.size(), flag) == 0 &&
          arg[flag.size()] == '=') {
        global.push_back(arg);
        taken = true;
        break;
      }
    }
    if (!taken) rest.push_back(arg);
  }
  global.insert(global.end(), rest.begin(), rest.end());
  return global;
}

namespace {

std::size_t EditDistance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and
  // swaps of neighbours ("lgos" is one step from "logs").
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = word.size() <= 4 ? 2 : 3;
  for (const auto& c : candidates) {
    std::size_t distance = EditDistance(word, c);
    if (distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  if (!best.empty() || word.empty()) return best;
  for (const auto& c : candidates) {
    if (c.compare(0, word.size(), word) == 0) return c;
  }
  return {};
}

namespace {

class CleanFormatter final : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string type = opt->get_type_name();
    if (opt->get_type_size() == 0 || type.empty()) return {};  // a flag
    std::string shown;
    if (auto brace = type.find('{'); brace != std::string::npos) {
      // "TEXT:{wide,json}" -> "{wide|json}"
      shown = type.substr(brace, type.find('}', brace) - brace + 1);
      std::replace(shown.begin(), shown.end(), ',', '|');
    } else {
      std::string base = type.substr(0, type.find_first_of(": "));
      shown = base == "INT" || base == "UINT" ? "N" : base == "FLOAT" ? "NUMBER" : "VALUE";
    }
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) shown += "...";
    return " " + shown;
  }

  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    const std::string& def = opt->get_default_str();
    if (!def.empty() && !opt->get_type_name().empty() &&
        desc.find("default") == std::string::npos) {
      desc += " (default " + def + ")";
    }
    return desc;
  }

  std::string make_footer(const CLI::App* app) const override {
    std::string footer = CLI::Formatter::make_footer(app);
    if (app->get_parent() != nullptr && app->get_name() != "server") {
      footer += (footer.empty() ? "" : "\n") +
                std::string(
                    "Global flags (anywhere on the line): --server URL, --token TOKEN, "
                    "--cacert FILE, --config FILE; see headway --help.\n");
    }
    return footer;
  }
};

// The subcommand names of `app` that a user may type.
std::vector<std::string> CommandNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands(
           [](const CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); })) {
    names.push_back(sub->get_name());
    for (const std::string& alias : sub->get_aliases()) names.push_back(alias);
  }
  return names;
}

// A word where `app` wants one of its subcommands that names none of them:
// the usage error, with the nearest name when one is near. Returns true
// when it printed one.
bool ReportUnknownCommand(const CLI::App& app, const std::vector<std::string>& args,
                          const std::string& program) {
  const CLI::App* current = &app;
  std::string path = program;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return false;
    if (!arg.empty() && arg[0] == '-') {
      // A global flag's value is the next word.
      if (current == &app && arg.find('=') == std::string::npos &&
          std::find(GlobalValueFlags().begin(), GlobalValueFlags().end(), arg) !=
              GlobalValueFlags().end()) {
        ++i;
      }
      if (current != &app) return false;  // a subcommand's own options: CLI11 judges them
      continue;
    }
    std::vector<std::string> names = CommandNames(current);
    if (std::find(names.begin(), names.end(), arg) != names.end()) {
      current = current->get_subcommand(arg);
      path += " " + arg;
      continue;
    }
    if (names.empty() || current->get_require_subcommand_min() == 0) return false;
    std::cerr << "error: unknown command '" << arg << "' for '" << path << "'";
    if (std::string near = ClosestMatch(arg, names); !near.empty()) {
      std::cerr << "; did you mean '" << near << "'?";
    }
    std::cerr << "\nRun '" << path << " --help' for the commands.\n";
    return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<CLI::Formatter> CleanHelpFormatter() { return std::make_shared<CleanFormatter>(); }

int ParseAndRun(CLI::App& app, int argc, char** argv) {
  if (app.get_name().empty()) app.name("headway");
  std::vector<std::string> args(argv + 1, argv + argc);
  args = HoistGlobalFlags(args, GlobalValueFlags());
  if (ReportUnknownCommand(app, args, "headway")) return 2;
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them backwards
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && std::string(e.what()) == "A subcommand is required") {
      std::cerr << "error: a command is required\n" << app.help();
      return 2;
    }
    int code = app.exit(e);
    // `headway exec JOB ls -la`: the command's own options reach the parser.
    const auto dashes = std::find(args.begin(), args.end(), "--");
    const bool exec =
        dashes == args.end() && std::find(args.begin(), args.end(), "exec") != args.end();
    if (code != 0 && exec && dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
      std::cerr << "hint: put the command after --, so its options are its own: "
                   "headway exec NAME -- CMD ARGS...\n";
    }
    return code == 0 ? 0 : 2;
  }
  return -1;
}

}  // namespace headway::cli
