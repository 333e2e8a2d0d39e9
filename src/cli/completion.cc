#include "cli/completion.h"

#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "cli/args.h"

namespace headway::cli {

namespace {

// Each command path ("headway get") with the words that may follow it.
void Collect(const CLI::App* app, const std::string& path,
             std::vector<std::pair<std::string, std::string>>& out) {
  std::string words;
  auto add = [&](const std::string& w) { words += (words.empty() ? "" : " ") + w; };
  for (const CLI::App* sub : app->get_subcommands(
           [](const CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); })) {
    add(sub->get_name());
  }
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_positional()) {
      // Fixed choices ("TEXT:{jobs,job,...}") are offered as words.
      std::string type = opt->get_type_name();
      auto brace = type.find('{');
      if (brace == std::string::npos) continue;
      std::string choices = type.substr(brace + 1, type.find('}', brace) - brace - 1);
      for (char& c : choices) {
        if (c == ',') c = ' ';
      }
      add(choices);
      continue;
    }
    for (const std::string& name : opt->get_lnames()) add("--" + name);
    for (const std::string& name : opt->get_snames()) add("-" + name);
  }
  if (app->get_parent() == nullptr) {
    for (const std::string& flag : GlobalValueFlags()) {
      if (words.find(flag) == std::string::npos) add(flag);
    }
  }
  out.emplace_back(path, words);
  for (const CLI::App* sub : app->get_subcommands(
           [](const CLI::App* s) { return !s->get_name().empty() && !s->get_group().empty(); })) {
    Collect(sub, path + " " + sub->get_name(), out);
  }
}

// Paths after which a name of one kind is expected, with the kind `get`
// lists. After get, describe and delete the kind is the word typed after
// them (the shell function keeps it as hw_kind).
const std::pair<const char*, const char*> kNamePaths[] = {
    {"headway logs", "jobs"},
    {"headway stop", "jobs"},
    {"headway wait", "jobs"},
    {"headway exec", "jobs"},
    {"headway ssh", "jobs"},
    {"headway rerun", "jobs"},
    {"headway exp get", "experiments"},
    {"headway exp describe", "experiments"},
    {"headway exp stop", "experiments"},
    {"headway exp delete", "experiments"},
    {"headway workflow get", "workflows"},
    {"headway workflow describe", "workflows"},
    {"headway workflow logs", "workflows"},
    {"headway workflow stop", "workflows"},
    {"headway workflow delete", "workflows"},
    {"headway workflow retry", "workflows"},
    {"headway workflow resubmit", "workflows"},
    {"headway workflow suspend", "workflows"},
    {"headway workflow resume", "workflows"},
    {"headway workflow terminate", "workflows"},
    {"headway notebook open", "notebooks"},
    {"headway notebook stop", "notebooks"},
    {"headway notebook delete", "notebooks"},
    {"headway notebook start", "notebooks"},
};
const char* const kResourceVerbPaths[] = {"headway get", "headway describe", "headway delete"};

// The shell `case` arms that set hw_kind from the command path; the same
// text serves bash and zsh.
std::string KindCaseArms(const std::string& indent) {
  std::string arms;
  for (const auto& [path, kind] : kNamePaths) {
    arms += indent + "\"" + std::string(path) + "\") hw_kind=" + kind + " ;;\n";
  }
  return arms;
}

// In the loop over the typed words: the first word after get, describe or
// delete that is no subcommand is the kind of resource.
std::string ResourceWordArm(const std::string& indent) {
  std::string paths;
  for (const char* p : kResourceVerbPaths)
    paths += (paths.empty() ? "" : "|") + ("\"" + std::string(p) + "\"");
  return indent + "*) case \"$hw_path\" in " + paths +
         ") [ -z \"$hw_res\" ] && hw_res=\"$w\" ;; esac ;;\n";
}

std::string Bash(const std::vector<std::pair<std::string, std::string>>& table) {
  std::string s =
      "# bash completion for headway. Load it with\n"
      "#   source <(headway completion bash)\n"
      "# or save it as /etc/bash_completion.d/headway.\n"
      "_headway() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" hw_path=\"headway\" hw_kind=\"\" hw_res=\"\" w i "
      "words=\"\"\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    case \"$w\" in\n"
      "      --server|--token|--cacert|--config) ((i++)); continue ;;\n"
      "      -*) continue ;;\n"
      "    esac\n"
      "    case \"$hw_path $w\" in\n";
  std::string paths;
  for (const auto& [path, words] : table) {
    if (path == "headway") continue;
    paths += (paths.empty() ? "" : "|") + ("\"" + path + "\"");
  }
  s += "      " + paths + ") hw_path=\"$hw_path $w\" ;;\n";
  s += ResourceWordArm("      ");
  s += "    esac\n  done\n  case \"$hw_path\" in\n";
  for (const auto& [path, words] : table) {
    s += "    \"" + path + "\") words=\"" + words + "\" ;;\n";
  }
  s += "  esac\n  case \"$hw_path\" in\n" + KindCaseArms("    ") + "  esac\n";
  // Once the kind is typed, only its names follow. Names come from the
  // binary that was typed, on PATH or not.
  s += "  [ -n \"$hw_res\" ] && hw_kind=\"$hw_res\" && words=\"\"\n";
  s += "  case \"$cur\" in\n    -*) ;;\n"
       "    *) if [ -n \"$hw_kind\" ]; then\n"
       "         words=\"$words $(\"${COMP_WORDS[0]}\" get \"$hw_kind\" -o name 2>/dev/null)\"\n"
       "       fi ;;\n  esac\n"
       "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
       "}\n"
       "complete -F _headway headway\n";
  return s;
}

std::string Zsh(const std::vector<std::pair<std::string, std::string>>& table) {
  std::string s =
      "#compdef headway\n"
      "# zsh completion for headway. Load it with\n"
      "#   source <(headway completion zsh)\n"
      "# or save it as _headway in a folder of $fpath.\n"
      "_headway() {\n"
      "  local hw_path=\"headway\" hw_kind=\"\" hw_res=\"\" w i\n"
      "  local -a choices\n"
      "  for ((i = 2; i < CURRENT; i++)); do\n"
      "    w=\"${words[i]}\"\n"
      "    case \"$w\" in\n"
      "      --server|--token|--cacert|--config) ((i++)); continue ;;\n"
      "      -*) continue ;;\n"
      "    esac\n"
      "    case \"$hw_path $w\" in\n";
  std::string paths;
  for (const auto& [path, words] : table) {
    if (path == "headway") continue;
    paths += (paths.empty() ? "" : "|") + ("\"" + path + "\"");
  }
  s += "      " + paths + ") hw_path=\"$hw_path $w\" ;;\n";
  s += ResourceWordArm("      ");
  s += "    esac\n  done\n  case \"$hw_path\" in\n";
  for (const auto& [path, words] : table) {
    s += "    \"" + path + "\") choices=(" + words + ") ;;\n";
  }
  s += "  esac\n  case \"$hw_path\" in\n" + KindCaseArms("    ") + "  esac\n";
  s += "  if [[ -n \"$hw_res\" ]]; then hw_kind=\"$hw_res\"; choices=(); fi\n";
  s += "  if [[ \"${words[CURRENT]}\" != -* && -n \"$hw_kind\" ]]; then\n"
       "    choices+=(${(f)\"$(\"${words[1]}\" get \"$hw_kind\" -o name 2>/dev/null)\"})\n"
       "  fi\n"
       "  compadd -- \"${choices[@]}\"\n"
       "}\n"
       "if [[ \"${funcstack[1]}\" == \"_headway\" ]]; then\n"
       "  _headway \"$@\"\n"
       "else\n"
       "  compdef _headway headway\n"
       "fi\n";
  return s;
}

}  // namespace

std::string CompletionScript(const CLI::App& root, const std::string& shell) {
  std::vector<std::pair<std::string, std::string>> table;
  Collect(&root, "headway", table);
  return shell == "zsh" ? Zsh(table) : Bash(table);
}

void AddCompletionCommand(CLI::App& root, int& exit_code) {
  auto shell = std::make_shared<std::string>();
  auto* cmd = root.add_subcommand("completion", "Print a shell completion script (bash or zsh)");
  cmd->add_option("shell", *shell, "the shell")->required()->check(CLI::IsMember({"bash", "zsh"}));
  cmd->callback([&root, &exit_code, shell] {
    std::cout << CompletionScript(root, *shell);
    exit_code = 0;
  });
}

}  // namespace headway::cli
