// lockctl: the lockd command-line tool (acquire, release, renew, describe,
// list, run, force-release, health, completion, verify). This header is the tool's
// internal interface: the command-line grammar (declared once, in
// CommandTable() and GlobalFlags(): parsing, the help overview and the
// completion scripts read it), argument parsing (pure, unit-tested) and the
// commands.
//
// Exit codes are part of the tool's documented interface (lockctl --help,
// docs/clients/lockctl.md). `run` passes its command's exit status through; the tool's own
// codes come from the sysexits(3) range so that they rarely collide with a
// command's.

#ifndef LOCKD_TOOLS_LOCKCTL_LOCKCTL_H_
#define LOCKD_TOOLS_LOCKCTL_LOCKCTL_H_

#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lockd/client.h"
#include "tools/lockctl/verify/runner.h"

namespace lockd::lockctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,            // any other error (bad input the server rejected, internal)
  kExitUsage = 64,           // bad command line (EX_USAGE)
  kExitUnavailable = 69,     // server unreachable or not answering (EX_UNAVAILABLE)
  kExitNotAcquired = 75,     // lock held by another owner past --wait (EX_TEMPFAIL)
  kExitLockLost = 76,        // lock lost while `run` ran its command, or not held (release/renew)
  kExitNoPermission = 77,    // UNAUTHENTICATED or PERMISSION_DENIED (EX_NOPERM)
  kExitCannotExecute = 126,  // run: the command exists but could not be executed
  kExitNotFound = 127,       // run: the command was not found
};

enum class Output { kText, kJson };

// One command of lockctl: its name, its line in the help overview, and the
// flags it takes besides the global ones (names without "--").
struct CommandSpec {
  std::string name;
  std::string summary;
  std::vector<std::string> flags;
};

// Every command, in help order.
const std::vector<CommandSpec>& CommandTable();
// The flags every command takes (connection, output, --help, --version).
const std::vector<std::string>& GlobalFlags();
// Flags that take no value (--tls, --unary, --help, --version).
bool IsBoolFlag(absl::string_view flag);

struct Invocation {
  std::string command;   // a CommandTable() name; "" with help or version
  bool help = false;     // --help / -h / `help [command]`: print Usage(command)
  bool version = false;  // --version: print VersionLine("lockctl")

  // Connection (global flags).
  std::string server;  // --server, $LOCKD_SERVER, default 127.0.0.1:7411
  std::string ns;      // --namespace, $LOCKD_NAMESPACE, default "" (server's "default")
  Output output = Output::kText;
  absl::Duration timeout = absl::Seconds(10);  // --timeout: per-call deadline
  TlsOptions tls;
  AuthOptions auth;  // --auth-token-file, $LOCKD_AUTH_TOKEN_FILE, $LOCKD_AUTH_TOKEN

  // Lock selection and lease.
  std::string name;
  std::string owner;
  absl::Duration ttl = absl::Seconds(30);
  absl::Duration wait = absl::ZeroDuration();

  // acquire/run kind: --shared (a reader), --limit N (a semaphore of N
  // permits; `list --limit` is Invocation::limit) and --permits K (with
  // --limit; 0: 1).
  bool shared = false;
  uint32_t semaphore_limit = 0;
  uint32_t permits = 0;
  // run --lock (repeatable): take all of them with AcquireAll, instead of --name.
  std::vector<std::string> locks;

  // release --acquire-request-id: undo that Acquire of owner instead of
  // releasing a hold (Client::UndoAcquire).
  std::string acquire_request_id;

  // list
  std::string prefix;
  int64_t limit = 0;  // 0: all

  // force-release --token, release/renew --fencing-token: act only on the
  // hold with this token; 0: whatever the holder's (force-release) or any
  // hold of owner (release, renew).
  uint64_t fencing_token = 0;

  // force-release
  std::string reason;

  // run
  int signal = 15;                                // SIGTERM
  absl::Duration kill_after = absl::Seconds(10);  // 0: never SIGKILL
  bool unary = false;  // --unary: no Session stream (ClientOptions::use_sessions = false)
  std::vector<std::string> argv;

  // health --service: "" asks about the server as a whole (liveness);
  // lockd.v1.LockService about its backend too (readiness).
  std::string service;

  // completion: bash or zsh.
  std::string shell;

  // verify (verify_command.cc): the run's options, connection flags
  // included; or, with --check FILE, the saved history to check instead.
  verify::VerifyOptions verify;
  std::string verify_check_file;
};

// Parses the arguments after the program name. `env` supplies LOCKD_SERVER,
// LOCKD_NAMESPACE, LOCKD_AUTH_TOKEN and LOCKD_AUTH_TOKEN_FILE. Flags are `--flag value` or
// `--flag=value` and may appear before or after the command; `run` takes its command after `--`.
// Errors: kInvalidArgument with a message for the user (usage error).
absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& args,
                                     const std::map<std::string, std::string>& env);

// Help text: the overview for "" or an unknown command, else the command's.
std::string Usage(absl::string_view command);

// "30s", "1m30s", "250ms"; a bare integer is seconds. kInvalidArgument otherwise
// or if negative.
absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view text);
// "TERM", "SIGTERM", "term", "15". kInvalidArgument otherwise.
absl::StatusOr<int> ParseSignal(absl::string_view text);

// The exit code for a call's status; `acquiring` for Acquire, whose
// kDeadlineExceeded means "not acquired in time" rather than "no answer".
// An Acquire whose undo went unanswered is kExitUnavailable.
int ExitCodeFor(const absl::Status& status, bool acquiring);

// For an Acquire of inv.name by `owner` that failed with its undo unanswered
// (UnconfirmedAcquireRequestId(status) is set): the `lockctl release ...
// --acquire-request-id ID` command line that undoes it, shell-quoted. ""
// for any other status.
std::string UndoCommand(const Invocation& inv, absl::string_view owner, const absl::Status& status);

// The acquire of inv.name with the kind inv asks for (Client::Acquire,
// AcquireShared, or Semaphore::Acquire of inv.permits).
absl::StatusOr<Lease> AcquireKind(const Invocation& inv, Client& client, AcquireOptions options);

// Runs a parsed, non-help invocation, writing results to `out` and
// diagnostics to `err`. Returns the process exit code.
int Execute(const Invocation& inv, std::ostream& out, std::ostream& err);

// `run`: see Usage("run"). Writes diagnostics to `err` only.
int RunCommand(const Invocation& inv, Client& client, std::ostream& err);

// `health`: one grpc.health.v1.Health/Check of inv.service on inv.server.
// Prints the status (SERVING, NOT_SERVING, ...; with --output json the
// HealthCheckResponse) and returns kExitOk only for SERVING, kExitError for
// any other status or a service the server does not know (NOT_FOUND), and
// ExitCodeFor's code when the call fails (kExitUnavailable: no answer).
int HealthCheck(const Invocation& inv, std::ostream& out, std::ostream& err);

// `verify`'s own flags (verify_command.cc), called by ParseArgs: one flag
// into `options` / `check_file` (flags verify does not know are left alone).
// kInvalidArgument naming the flag.
absl::Status ParseVerifyFlag(absl::string_view flag, const std::string& value,
                             verify::VerifyOptions& options, std::string& check_file);
// After every flag: copies the connection flags into inv.verify and applies
// verify's defaults (namespace lockd-verify unless --namespace; its own
// --ttl and --wait defaults unless given). kInvalidArgument as above.
absl::Status FinishVerifyFlags(Invocation& inv, bool ttl_set, bool wait_set, bool ns_set);
// Usage("verify").
std::string VerifyUsage();
// `verify`: RunVerify, or RunVerifyCheck with --check. Its exit codes are
// its own: 0 every check holds, 1 one failed, 2 bad usage (main() gives
// verify's command-line errors 2 too, see CommandOf).
int VerifyCommand(const Invocation& inv, std::ostream& out, std::ostream& err);
// The command named in `args` (the first argument that is neither a flag
// nor a flag's value), "" if none.
std::string CommandOf(const std::vector<std::string>& args);

// `completion`: the completion script for `shell` ("bash" or "zsh"), built
// from CommandTable() and GlobalFlags(). "" for another shell.
std::string CompletionScript(absl::string_view shell);

}  // namespace lockd::lockctl

#endif  // LOCKD_TOOLS_LOCKCTL_LOCKCTL_H_
