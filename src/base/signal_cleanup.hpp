// Cleanup when SIGINT, SIGTERM or SIGHUP ends the process: registered temporary files are removed
// and a registered child process is stopped, then the signal is raised again with its default
// action, so the caller still sees "killed by SIGTERM" (exit status 128+n in a shell).
//
// The handler is installed on first use, and only over a default disposition: a signal the user
// chose to ignore (nohup) stays ignored. It uses only async-signal-safe calls (unlink, kill,
// sigaction, raise) on data published with lock-free atomics.
#pragma once

#include <sys/types.h>

#include <string>

namespace kvrank::detail {

/// Removes `path` if one of the signals arrives while registered. `path` must stay alive (and
/// unchanged) until unregister_temp_file. Register before creating the file and unregister after
/// removing or renaming it: a signal in between then unlinks a name that is not there, which is
/// harmless, and no moment exists where the file is there but unregistered. Returns false when all
/// slots are taken.
bool register_temp_file(const std::string& path);
void unregister_temp_file(const std::string& path);

/// Sends SIGTERM to `pid` if one of the signals arrives while registered (0: none).
void register_child(pid_t pid);

}  // namespace kvrank::detail
