// An SSH server for one connection over a pair of descriptors: what
// `headway ssh --stdio` reaches inside a job, so that OpenSSH's client (and
// what rides on it: VS Code's Remote-SSH, scp, sftp, port forwarding) works
// with a job as its host, with no sshd in the job and no port opened.
//
// The connection has already been authenticated and authorised by the
// Headway server (the caller's token, the job's team) and travels inside its
// TLS connection, so the SSH layer asks for nothing more: it accepts the
// client's "none" authentication, whatever the user name. Every command runs
// as the process that serves it (the job's account, inside the job), with the
// given environment and working directory.
//
// Supported: sessions (exec, shell, subsystem sftp when an sftp-server is
// installed), with or without a terminal, several at once; environment
// requests for TERM, LANG and LC_*; window changes; local port forwarding
// (direct-tcpip) to addresses the job can reach. Not supported: agent and X11
// forwarding, remote port forwarding.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace headway {

struct SshServeOptions {
  // The host key in OpenSSH's private key format (see EnsureSshHostKey).
  std::string host_key;
  std::vector<std::string> env;  // "NAME=value", every command's environment
  std::string cwd = "/";
  std::string shell = "/bin/sh";  // commands run as `shell -c COMMAND`, logins as `shell -l`
  // The first that exists serves the "sftp" subsystem.
  std::vector<std::string> sftp_servers = {"/usr/lib/openssh/sftp-server", "/usr/lib/sftp-server"};
};

// Serves one SSH connection read from `in` and written to `out` until the
// client disconnects or the stream ends. Returns 0 after a connection that
// authenticated, else 255 with the reason on stderr. Forks: call it from a
// single-threaded process.
int ServeSshConnection(int in, int out, const SshServeOptions& options);

// `headway ssh-serve`: ServeSshConnection on stdin and stdout as this
// process's user, in its environment and working directory, with the host
// key taken from (and cleared out of) HEADWAY_SSH_HOST_KEY. What a Slurm
// step runs for `headway ssh --stdio`.
int ServeSshFromEnvironment();

// The shell a session runs: the account's, else the environment's SHELL,
// else bash or sh; an account such as nobody has one that refuses logins.
std::string SessionShell(const std::string& account_shell, const std::vector<std::string>& env);

// The host key at `path`, made (ed25519, mode 0600) when there is none.
Result<std::string> LoadOrCreateSshHostKey(const std::string& path);

}  // namespace headway
