#include "cli/commands.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/artifact_commands.h"
#include "cli/command_support.h"
#include "cli/completion.h"
#include "cli/config.h"
#include "cli/experiment_commands.h"
#include "cli/job_commands.h"
#include "cli/notebook_commands.h"
#include "cli/output.h"
#include "cli/resource_commands.h"
#include "cli/token_commands.h"
#include "cli/workflow_commands.h"
#include "core/version.h"

namespace headway::cli {
namespace {

using nlohmann::json;

int PrintVersion(const Options& o) {
  json out = {{"client", {{"version", headway::Version()}}}};
  int result = kExitOk;
  if (!o.client_only) {
    Client client(o);
    auto v = client.Call("GET", "/api/v1/version");
    if (v) {
      out["server"] = *v;
      out["server"]["url"] = client.http().base_url();
    } else {
      result = client.exit_code;
    }
  }
  if (PrintStructured(o, out)) return result;
  std::cout << "Client Version: " << headway::Version() << "\n";
  if (out.contains("server")) {
    std::cout << "Server Version: " << Safe(out["server"].value("version", "?")) << " ("
              << Safe(out["server"]["url"].get<std::string>()) << ")\n";
  }
  return result;
}

void AddOutputFlag(CLI::App* cmd, Options& o, std::vector<std::string> allowed) {
  cmd->add_option("-o,--output", o.output, "output format")->check(CLI::IsMember(allowed));
}

}  // namespace

std::shared_ptr<void> AddClientCommands(CLI::App& app, int& exit_code,
                                        std::string admin_token_file) {
  auto options = std::make_shared<Options>();
  Options& o = *options;
  o.admin_token_file = std::move(admin_token_file);
  app.add_option("--server", o.server,
                 "Headway server URL (default: $HEADWAY_SERVER or http://127.0.0.1:8080)");
  app.add_option("--cacert", o.ca_file,
                 "PEM file of the CA (or self-signed certificate) an https:// server's "
                 "certificate chains to (default: $HEADWAY_CA_FILE, and the system's CAs)");
  app.add_option("--token", o.token,
                 "user token (default: $HEADWAY_API_TOKEN or $HEADWAY_USER_TOKEN, the config "
                 "file's, or the admin token a local server wrote to DATA_DIR/admin-token)");
  app.add_option("--config", o.config_path,
                 "client config file with server, token and cacert (default: $HEADWAY_CONFIG, "
                 "else $XDG_CONFIG_HOME/headway/config or ~/.config/headway/config; must be "
                 "mode 0600). Flags win over environment variables, which win over it");
  // The config file is read once the command line is parsed, before the
  // command runs; the server and `completion` do not read it.
  app.parse_complete_callback([&app, &o] {
    if (app.got_subcommand("server") || app.got_subcommand("completion")) return;
    auto config = LoadClientConfig(o.config_path);
    if (!config.ok()) throw CLI::ValidationError("--config", config.status().message());
    for (const auto& warning : config->warnings) std::cerr << "warning: " << warning << "\n";
    o.config = std::move(*config);
  });

  auto* token = app.add_subcommand("token", "User tokens of the server");
  token->require_subcommand(1);
  auto* token_create = token->add_subcommand("create", "Create a token and print its secret once");
  token_create->add_option("name", o.name, "token name (lowercase letters, digits, '-')")
      ->required();
  token_create->add_option("--team", o.team, "the team it acts for (not needed for admin)");
  token_create
      ->add_option("--role", o.role, "viewer (reads), member (runs its team's jobs) or admin")
      ->capture_default_str()
      ->check(CLI::IsMember({"viewer", "member", "admin"}));
  token_create->add_option("--ttl", o.ttl,
                           "stop working after this long, e.g. 24h, 7d (default: until revoked)");
  AddOutputFlag(token_create, o, {"json", "yaml"});
  token_create->callback([&exit_code, &o] { exit_code = TokenCreate(o); });
  auto* token_list = token->add_subcommand("list", "List tokens (never their secrets)");
  token_list->add_flag("--sessions", o.sessions,
                       "the dashboard's sign-in sessions and one-time links too (one per sign-in)");
  AddOutputFlag(token_list, o, {"json", "yaml"});
  token_list->callback([&exit_code, &o] { exit_code = TokenList(o); });
  auto* token_revoke = token->add_subcommand("revoke", "Revoke a token; it stops working at once");
  token_revoke->add_option("name", o.name, "token name")->required();
  token_revoke->callback([&exit_code, &o] { exit_code = TokenRevoke(o); });

  auto* submit = app.add_subcommand("submit", "Submit a job from a YAML or JSON spec");
  submit->add_option("-f,--file", o.file, "job spec file, or - for standard input")->required();
  submit->add_option("--name", o.submit_name,
                     "name the job this, whatever the spec's name or generateName says");
  AddOutputFlag(submit, o, {"name", "json", "yaml"});
  submit->callback([&exit_code, &o] { exit_code = Submit(o); });

  auto* get =
      app.add_subcommand("get",
                         "List resources: jobs, experiments (exp), workflows (wf), notebooks (nb), "
                         "artifacts (art), queues, nodes");
  get->add_option("resource", o.resource, "what to list")
      ->required()
      ->check(CLI::IsMember(ResourceNames("get")));
  get->add_option("name", o.name, "one of them, by name");
  get->add_option("--state", o.state, "only jobs in this state (Queued, Running, ...)");
  get->add_option("--team", o.team, "only this team's jobs");
  get->add_option("-l,--selector", o.labels, "label filter key=value (repeatable)");
  get->add_flag("--active", o.active, "only jobs that have not ended");
  get->add_flag("-w,--watch", o.watch,
                "after the list, print a row for each job that changes, until interrupted "
                "(reconnects across server restarts)");
  get->add_option("--sort-by", o.sort_by,
                  "jobs: sort by a column (name, state, health, progress, step, eta, loss, gpus, "
                  "age, team, restarts, priority) or a field path such as .progress.percent");
  get->add_flag("--no-headers", o.no_headers, "print the table without its header line");
  AddOutputFlag(get, o, {"wide", "json", "yaml", "name"});
  get->callback([&exit_code, &o] { exit_code = GetResource(o); });

  auto* exp =
      app.add_subcommand("exp", "Hyperparameter experiments: create, get, describe, stop, delete");
  exp->require_subcommand(1);
  auto* exp_create = exp->add_subcommand("create", "Start an experiment from a YAML or JSON spec");
  exp_create->add_option("-f,--file", o.file, "experiment spec file, or - for standard input")
      ->required();
  AddOutputFlag(exp_create, o, {"json", "yaml"});
  exp_create->callback([&exit_code, &o] { exit_code = ExpCreate(o); });
  auto* exp_get = exp->add_subcommand("get", "List experiments with their best trial");
  exp_get->add_option("name", o.name, "one experiment");
  AddOutputFlag(exp_get, o, {"json", "yaml", "name"});
  exp_get->callback([&exit_code, &o] { exit_code = ExpGet(o); });
  auto* exp_describe =
      exp->add_subcommand("describe", "An experiment's trials: parameters and objective");
  exp_describe->add_option("name", o.name, "experiment name")->required();
  AddOutputFlag(exp_describe, o, {"json", "yaml"});
  exp_describe->callback([&exit_code, &o] { exit_code = ExpDescribe(o); });
  auto* exp_stop = exp->add_subcommand("stop", "Stop an experiment and its running trials");
  exp_stop->add_option("name", o.name, "experiment name")->required();
  AddOutputFlag(exp_stop, o, {"json", "yaml"});
  exp_stop->callback([&exit_code, &o] { exit_code = ExpStop(o); });
  auto* exp_delete = exp->add_subcommand(
      "delete", "Delete an ended experiment with its trials' jobs; its name is free again");
  exp_delete->add_option("name", o.name, "experiment name")->required();
  AddOutputFlag(exp_delete, o, {"json", "yaml"});
  exp_delete->callback([&exit_code, &o] { exit_code = ExpDelete(o); });

  auto* workflow = app.add_subcommand(
      "workflow",
      "Argo-compatible workflows: submit, get, list, logs, retry, suspend, resume, stop, delete");
  workflow->alias("wf");
  workflow->require_subcommand(1);
  auto* wf_submit = workflow->add_subcommand("submit", "Submit an Argo Workflow (YAML or JSON)");
  wf_submit->add_option("file", o.file, "the manifest, or - for standard input")->required();
  wf_submit->add_flag("--wait", o.wait, "wait until it ends; exit 0 only if it succeeded");
  wf_submit->add_option("-p,--parameter", o.parameters,
                        "set a workflow argument NAME=VALUE (repeatable)");
  AddOutputFlag(wf_submit, o, {"json", "yaml", "name"});
  wf_submit->callback([&exit_code, &o] { exit_code = WorkflowSubmit(o); });
  auto* wf_list = workflow->add_subcommand("list", "List workflows, newest first");
  wf_list->add_option("--status", o.state,
                      "only workflows in this phase (Running, Succeeded, ...)");
  wf_list->add_option("-l,--selector", o.labels, "label filter key=value (repeatable)");
  AddOutputFlag(wf_list, o, {"json", "yaml", "name"});
  wf_list->callback([&exit_code, &o] { exit_code = WorkflowList(o); });
  for (const char* verb : {"get", "describe"}) {
    auto* wf_get = workflow->add_subcommand(verb, "A workflow with its steps");
    wf_get->add_option("name", o.name, "workflow name")->required();
    AddOutputFlag(wf_get, o, {"json", "yaml", "name"});
    wf_get->callback([&exit_code, &o] { exit_code = WorkflowGet(o); });
  }
  auto* wf_logs =
      workflow->add_subcommand("logs", "Every step's output, each line with its step's name");
  wf_logs->add_option("name", o.name, "workflow name")->required();
  wf_logs->callback([&exit_code, &o] { exit_code = WorkflowLogs(o); });
  auto* wf_resubmit =
      workflow->add_subcommand("resubmit", "Run a workflow again as a new one (NAME-xxxxx)");
  wf_resubmit->add_option("name", o.name, "workflow name")->required();
  wf_resubmit->add_flag("--memoized", o.memoized,
                        "keep the steps that succeeded; run only the others");
  wf_resubmit->add_option("-p,--parameter", o.parameters,
                          "NAME=VALUE: override one of the workflow's arguments (repeatable)");
  AddOutputFlag(wf_resubmit, o, {"json", "yaml", "name"});
  wf_resubmit->callback([&exit_code, &o] { exit_code = WorkflowResubmit(o); });
  auto* wf_retry =
      workflow->add_subcommand("retry", "Run the failed steps again, with what depends on them");
  wf_retry->add_option("name", o.name, "workflow name")->required();
  wf_retry->add_flag("--restart-successful", o.restart_successful,
                     "also run again the succeeded steps that --node-field-selector names");
  wf_retry->add_option("--node-field-selector", o.node_selector,
                       "only nodes whose name contains this (displayName=NAME)");
  wf_retry->add_option(
      "-p,--parameter", o.parameters,
      "NAME=VALUE: override one of the workflow's arguments for the steps that run "
      "again (repeatable)");
  AddOutputFlag(wf_retry, o, {"json", "yaml"});
  wf_retry->callback([&exit_code, &o] { exit_code = WorkflowAct(o, "retry"); });
  for (const auto& [verb, help] : std::vector<std::pair<const char*, const char*>>{
           {"suspend", "Start no new step until resumed"},
           {"resume", "Resume a suspended workflow, or its waiting suspend steps"},
           {"stop", "Stop its running steps, then run its exit handlers"},
           {"terminate", "Stop its running steps without running exit handlers"}}) {
    auto* cmd = workflow->add_subcommand(verb, help);
    cmd->add_option("name", o.name, "workflow name")->required();
    AddOutputFlag(cmd, o, {"json", "yaml"});
    std::string action = verb;
    cmd->callback([&exit_code, &o, action] { exit_code = WorkflowAct(o, action); });
  }
  auto* wf_delete =
      workflow->add_subcommand("delete", "Delete a workflow (its running steps are stopped)");
  wf_delete->add_option("name", o.name, "workflow name")->required();
  wf_delete->callback([&exit_code, &o] { exit_code = WorkflowDelete(o); });

  auto* exec = app.add_subcommand(
      "exec",
      "Run a command inside a running job: `headway exec NAME [--rank N] [-i] [-t] -- CMD...`");
  exec->add_option("name", o.name, "job name")->required();
  exec->add_option("command", o.exec_command, "the command and its arguments, after --")
      ->required();
  exec->add_option("--rank", o.rank, "which rank's process to join (default 0)");
  exec->add_flag("-i,--stdin", o.exec_stdin, "pass this terminal's (or pipe's) stdin to it");
  exec->add_flag("-t,--tty", o.exec_tty, "run it on a terminal (with -i: interactive programs)");
  exec->callback([&exit_code, &o] { exit_code = ExecInJob(o, false); });
  auto* ssh = app.add_subcommand(
      "ssh", "An interactive shell inside a running job (or notebook's job), as its account");
  ssh->add_option("name", o.name, "job name")->required();
  ssh->add_option("--rank", o.rank, "which rank's process to join (default 0)");
  ssh->add_flag("--stdio", o.ssh_stdio,
                "carry an SSH connection on stdin and stdout, for OpenSSH's ProxyCommand "
                "(VS Code Remote-SSH, scp, sftp, ssh -L); NAME may end in .headway");
  ssh->callback([&exit_code, &o] { exit_code = ExecInJob(o, true); });

  auto* notebook = app.add_subcommand(
      "notebook", "Jupyter notebooks on the pool: start, list, open, stop, delete");
  notebook->alias("nb");
  notebook->require_subcommand(1);
  auto* nb_start = notebook->add_subcommand(
      "start", "Start a notebook (or start a stopped or culled one again, with the same home)");
  nb_start->add_option("name", o.name, "notebook name")->required();
  nb_start->add_option("--profile", o.profile, "one of the server's notebook profiles");
  nb_start->add_option("--gpus", o.gpus, "GPUs (default: the profile's; at most the profile's)");
  nb_start->add_option("--team", o.team, "team (default: your token's)");
  nb_start->add_flag("--wait", o.wait, "wait until its server answers");
  AddOutputFlag(nb_start, o, {"json", "yaml", "name"});
  nb_start->callback([&exit_code, &o] { exit_code = NotebookStart(o); });
  auto* nb_list = notebook->add_subcommand("list", "List notebooks: status, GPUs, idle time");
  nb_list->alias("get");
  nb_list->add_option("name", o.name, "one notebook");
  AddOutputFlag(nb_list, o, {"json", "yaml", "name"});
  nb_list->callback([&exit_code, &o] { exit_code = NotebookList(o); });
  auto* nb_open = notebook->add_subcommand(
      "open", "Print a one-time link that opens the notebook in a browser (good for a minute)");
  nb_open->add_option("name", o.name, "notebook name")->required();
  AddOutputFlag(nb_open, o, {"json", "yaml"});
  nb_open->callback([&exit_code, &o] { exit_code = NotebookOpen(o); });
  for (const auto& [verb, help] : std::vector<std::pair<const char*, const char*>>{
           {"stop", "Stop a notebook's server; its GPUs go back to the pool, its home stays"},
           {"delete", "Stop a notebook and forget it; its home stays"}}) {
    auto* cmd = notebook->add_subcommand(verb, help);
    cmd->add_option("name", o.name, "notebook name")->required();
    AddOutputFlag(cmd, o, {"json", "yaml"});
    std::string action = verb;
    cmd->callback([&exit_code, &o, action] { exit_code = NotebookAct(o, action); });
  }

  auto* artifacts =
      app.add_subcommand("artifacts", "Checkpoints, models, datasets and outputs, with lineage");
  artifacts->require_subcommand(1);
  auto* artifacts_ls = artifacts->add_subcommand("ls", "List artifact versions");
  artifacts_ls->add_option("name", o.name, "only this artifact's versions");
  artifacts_ls->add_option("--kind", o.kind, "only checkpoints, models, datasets or outputs")
      ->check(CLI::IsMember({"checkpoint", "model", "dataset", "output"}));
  artifacts_ls->add_option("--job", o.job, "only those this job produced");
  artifacts_ls->add_option("--team", o.team, "only this team's");
  AddOutputFlag(artifacts_ls, o, {"json", "yaml", "name"});
  artifacts_ls->callback([&exit_code, &o] { exit_code = ArtifactsList(o); });
  auto* artifacts_put =
      artifacts->add_subcommand("put", "Store a file as a new version of an artifact");
  artifacts_put->add_option("file", o.file, "the file to store")->required();
  artifacts_put->add_option("--name", o.name, "artifact name (lowercase letters, digits, - _ .)")
      ->required();
  artifacts_put->add_option("--kind", o.kind, "checkpoint, model, dataset or output (default)")
      ->check(CLI::IsMember({"checkpoint", "model", "dataset", "output"}));
  artifacts_put->add_option("--team", o.team, "the team it belongs to (default: your token's)");
  artifacts_put->add_option("--job", o.job, "the job that produced it");
  artifacts_put->add_option("--step", o.step, "the step it was produced at")
      ->check(CLI::NonNegativeNumber);
  artifacts_put->add_option("--label", o.labels, "KEY=VALUE (repeatable)");
  artifacts_put->add_option("--metric", o.metrics,
                            "NAME=NUMBER at the time, e.g. eval_loss=0.41 (repeatable)");
  AddOutputFlag(artifacts_put, o, {"json", "yaml"});
  artifacts_put->callback([&exit_code, &o] { exit_code = ArtifactsPut(o); });
  auto* artifacts_get = artifacts->add_subcommand("get", "Download a version (its digest checked)");
  artifacts_get->add_option("ref", o.name, "NAME (latest ready version) or NAME:VERSION")
      ->required();
  artifacts_get->add_option("destination", o.destination, "file or directory (default: ./NAME)");
  artifacts_get->callback([&exit_code, &o] { exit_code = ArtifactsGet(o); });
  auto* artifacts_describe =
      artifacts->add_subcommand("describe", "A version in detail, with its lineage");
  artifacts_describe->add_option("ref", o.name, "NAME or NAME:VERSION")->required();
  AddOutputFlag(artifacts_describe, o, {"json", "yaml"});
  artifacts_describe->callback([&exit_code, &o] { exit_code = ArtifactsDescribe(o, false); });
  auto* artifacts_lineage =
      artifacts->add_subcommand("lineage", "Which job made a version, what it read, who used it");
  artifacts_lineage->add_option("ref", o.name, "NAME or NAME:VERSION")->required();
  AddOutputFlag(artifacts_lineage, o, {"json", "yaml"});
  artifacts_lineage->callback([&exit_code, &o] { exit_code = ArtifactsDescribe(o, true); });
  auto* artifacts_rm =
      artifacts->add_subcommand("rm", "Delete a version (its bytes go once no version holds them)");
  artifacts_rm->add_option("ref", o.name, "NAME:VERSION")->required();
  artifacts_rm->callback([&exit_code, &o] { exit_code = ArtifactsRemove(o); });

  auto* describe = app.add_subcommand(
      "describe",
      "Show a job (with its events), experiment, workflow, notebook or artifact in detail");
  describe->add_option("resource", o.resource, "job, experiment, workflow, notebook or artifact")
      ->required()
      ->check(CLI::IsMember(ResourceNames("describe")));
  describe->add_option("name", o.name, "its name (artifacts: NAME or NAME:VERSION)")->required();
  AddOutputFlag(describe, o, {"json", "yaml"});
  describe->callback([&exit_code, &o] { exit_code = DescribeResource(o); });

  auto* logs = app.add_subcommand("logs", "Print a job's output (all ranks, or one)");
  logs->add_option("name", o.name, "job name")->required();
  logs->add_flag("-f,--follow", o.follow, "keep printing until the job ends");
  logs->add_option("--rank", o.rank, "only this rank")->check(CLI::NonNegativeNumber);
  logs->add_option("--attempt", o.attempt, "an earlier attempt (0 = first run)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--tail", o.tail,
                   "only the newest N lines of each rank (default: all; with -f, then follow)")
      ->check(CLI::NonNegativeNumber);
  logs->add_option("--limit-bytes", o.limit_bytes,
                   "at most N bytes of whole lines; a cut output ends with a line saying so "
                   "(with --tail: the newest lines that fit)")
      ->check(CLI::PositiveNumber);
  auto* since =
      logs->add_option("--since", o.since, "only lines written in the last DURATION (90s, 5m, 2h)");
  logs->add_option("--since-time", o.since_time,
                   "only lines written from this RFC 3339 time on (2026-12-03T10:00:00Z)")
      ->excludes(since);
  logs->add_flag("--timestamps", o.timestamps,
                 "start each line with when it was written (RFC 3339, UTC)");
  logs->callback([&exit_code, &o] { exit_code = Logs(o); });

  auto* stop = app.add_subcommand("stop", "Stop jobs (SIGTERM, then SIGKILL after the grace)");
  stop->add_option("names", o.names, "job names")->required();
  stop->add_flag("--force", o.force,
                 "kill at once with SIGKILL, without the job's grace (admin tokens only)");
  stop->callback([&exit_code, &o] { exit_code = Stop(o); });
  auto* del = app.add_subcommand(
      "delete",
      "Delete ended jobs (with their progress, events, logs and files), experiments "
      "(with their trials), workflows, notebooks or artifact versions");
  del->add_option("resource", o.resource, "job, experiment, workflow, notebook or artifact")
      ->required()
      ->check(CLI::IsMember(ResourceNames("delete")));
  del->add_option("names", o.names, "their names (artifacts: NAME:VERSION)")->required();
  del->add_flag("--force", o.force,
                "a job that has not ended is stopped (SIGTERM, SIGKILL after its grace) and "
                "deleted once it has ended");
  del->callback([&exit_code, &o] { exit_code = DeleteResources(o); });
  auto* rerun = app.add_subcommand(
      "rerun", "Submit a new job with an existing job's spec, named NAME-2, NAME-3, ...");
  rerun->add_option("name", o.name, "the job to run again")->required();
  AddOutputFlag(rerun, o, {"name", "json", "yaml"});
  rerun->callback([&exit_code, &o] { exit_code = Rerun(o); });
  auto* top = app.add_subcommand(
      "top", "Live, sorted view of jobs that fits the terminal (q quits, s sorts, r reverses)");
  top->add_option("-n,--interval", o.interval_s, "seconds between refreshes (default 2)")
      ->check(CLI::Range(0.1, 3600.0));
  auto* iterations = top->add_option("--iterations", o.iterations,
                                     "stop after this many refreshes (0: never; without a "
                                     "terminal the default is 1)")
                         ->check(CLI::NonNegativeNumber);
  top->add_flag("--active", o.active, "only jobs that have not ended");
  top->add_option("--sort-by", o.sort_by,
                  "first sort column: progress, eta, name, gpus, age, state (keys s, <, > and r "
                  "change it while running)")
      ->check(CLI::IsMember({"progress", "eta", "name", "gpus", "age", "state"}));
  top->add_flag("--reverse", o.reverse, "sort the other way");
  AddOutputFlag(top, o, {"wide"});
  top->callback([&exit_code, &o, iterations] { exit_code = Top(o, iterations->count() > 0); });

  auto* wait = app.add_subcommand(
      "wait",
      "Block until a job reaches a condition (exit 0), ends without it (1), or times out (4)");
  wait->add_option("name", o.name, "job name")->required();
  wait->add_option("--until", o.until,
                   "ended | STATE | state=STATE | health=HEALTH | step>=N | percent>=N")
      ->capture_default_str();
  wait->add_option("--timeout", o.timeout, "give up after this long (0: never)")
      ->capture_default_str();
  wait->callback([&exit_code, &o] { exit_code = Wait(o); });

  auto* version = app.add_subcommand("version", "Print the client's version and the server's");
  version->add_flag("--client", o.client_only, "only the client's (no request)");
  AddOutputFlag(version, o, {"json", "yaml"});
  version->callback([&exit_code, &o] { exit_code = PrintVersion(o); });

  AddCompletionCommand(app, exit_code);
  return options;
}

}  // namespace headway::cli
