# shellcheck shell=bash
# tools/lib/run-guard.sh — a script that starts servers and daemons leaves none of them running
# (issue 51, item 3). Sourced by tools/test and tools/attack:
#
#   run_guard_init "$0" "$@"   # first thing: re-executes the script as a child subreaper (see
#                              # below) and exports SITEKEEP_RUN_MARK, a token unique to this run
#   run_guard_leftovers        # prints "PID COMMAND" for each process of this run still alive
#   run_guard_reap WHO         # names the leftovers on stderr (as WHO), ends them by pid (TERM,
#                              # then KILL, and the process groups they lead); status 1 if any
#
# A process of this run is one that is still a descendant of the script's shell, or one whose
# environment carries SITEKEEP_RUN_MARK=<this run's token>. As a child subreaper
# (prctl PR_SET_CHILD_SUBREAPER, kept across execve) the script's shell adopts every orphan of
# its descendants instead of init: a server started with nohup or setsid by a script that then
# exited (tools/vault-server start), a daemon that forks itself away (gnome-keyring-daemon), a
# child of a test process that crashed, all stay its descendants. The token reaches what was
# started with the environment inherited; the subreaper reaches what was started with a cleared
# one. Only processes of this run are ever signalled, by pid: never by name, never the process
# group the script itself runs in.

# The system Python, run by exec in this very process: a python3 found first on PATH may be a
# wrapper (a pyenv shim) that runs Python as a child, which would be the subreaper (or the
# parent-death watcher) instead of the script.
RUN_GUARD_PYTHON=/usr/bin/python3
[ -x "$RUN_GUARD_PYTHON" ] || RUN_GUARD_PYTHON=python3

# run_guard_init SCRIPT [ARG...] — call before anything else is started.
run_guard_init() {
    if [ "${SITEKEEP_RUN_GUARD_PID:-}" != "$$" ]; then
        # Not yet a subreaper: become one (Python's ctypes reaches prctl), and exec the script
        # again, under the same pid; the guard's own pid marks that it is done.
        export SITEKEEP_RUN_GUARD_PID=$$
        exec "$RUN_GUARD_PYTHON" -c 'import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.stderr.write("run-guard: prctl(PR_SET_CHILD_SUBREAPER) failed; orphans go to init\n")
os.execv("/bin/bash", ["bash"] + sys.argv[1:])' "$@"
    fi
    # A token of its own even under another guarded script: its scan must not take the caller's.
    SITEKEEP_RUN_MARK="sitekeep-run-$$-$(date +%s)-$RANDOM$RANDOM"
    export SITEKEEP_RUN_MARK
}

# run_guard_exec_tied PROGRAM [ARG...] — in a subshell started with `( … ) &`: execs PROGRAM with
# a parent-death signal (prctl PR_SET_PDEATHSIG, SIGTERM, kept across execve), so a server the
# script starts ends with the script even when no trap can run (SIGKILL, a CI timeout). PROGRAM
# is a path; its environment is the subshell's (no secret goes on the command line).
run_guard_exec_tied() {
    exec "$RUN_GUARD_PYTHON" -c 'import ctypes, os, signal, sys
parent = os.getppid()
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != parent:  # the shell that started it is gone already
    sys.exit(1)
os.execv(sys.argv[1], sys.argv[1:])' "$@"
}

# run_guard_leftovers — "PID COMMAND" per line for every live process of this run (zombies and
# the scan itself left out).
run_guard_leftovers() {
    "$RUN_GUARD_PYTHON" - "$$" <<'PY'
import os, sys
root = int(sys.argv[1])
mark = ("SITEKEEP_RUN_MARK=" + os.environ.get("SITEKEEP_RUN_MARK", "")).encode()
procs = {}
for d in os.listdir("/proc"):
    if not d.isdigit():
        continue
    try:
        stat = open(f"/proc/{d}/stat", "rb").read().decode(errors="replace")
        state, ppid = stat.rsplit(")", 1)[1].split()[0:2]
        procs[int(d)] = (state, int(ppid))
    except (OSError, ValueError, IndexError):
        pass
# The scan and the shells between it and the script are not leftovers.
skip, p = set(), os.getpid()
while p in procs and p not in skip:
    skip.add(p)
    if p == root:
        break
    p = procs[p][1]
skip.add(root)
def descends(pid):
    seen = set()
    while pid in procs and pid not in seen:
        seen.add(pid)
        pid = procs[pid][1]
        if pid == root:
            return True
    return False
def marked(pid):
    if mark == b"SITEKEEP_RUN_MARK=":
        return False
    try:
        return mark in open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    except OSError:
        return False
for pid, (state, _) in sorted(procs.items()):
    if pid in skip or state in ("Z", "X"):
        continue
    if descends(pid) or marked(pid):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        print(pid, (cmd or "?")[:160])
PY
}

# run_guard_end_all — ends every process of this run still alive (TERM, 3 s, KILL), silently:
# for a script interrupted while its children run, before its teardown and its check.
run_guard_end_all() {
    local pid i
    for pid in $(run_guard_leftovers | cut -d' ' -f1); do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for i in $(seq 1 30); do
        [ -n "$(run_guard_leftovers)" ] || return 0
        sleep 0.1
    done
    for pid in $(run_guard_leftovers | cut -d' ' -f1); do
        kill -KILL "$pid" 2>/dev/null || true
    done
}

# run_guard_reap WHO — after the script's own teardown: what of this run is still alive is a
# leftover. Waits up to 5 s for processes already told to stop, then names what remains on
# stderr, ends it (TERM, 3 s, KILL; a leftover that leads its own process group takes its group
# with it) and returns 1. Returns 0 when nothing is left.
run_guard_reap() {
    local who=${1:-run-guard} left pid i own_pgid
    for i in $(seq 1 50); do
        left="$(run_guard_leftovers)"
        [ -n "$left" ] || return 0
        [ "$i" -lt 50 ] && sleep 0.1
    done
    echo "$who: FAILED: these processes this run started were still running at its end (now ended):" >&2
    printf '%s\n' "$left" | sed 's/^\([0-9]*\) /  pid \1: /' >&2
    own_pgid=$(ps -o pgid= -p $$ | tr -d ' ')
    for pid in $(printf '%s\n' "$left" | cut -d' ' -f1); do
        if [ "$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')" = "$pid" ] && [ "$pid" != "$own_pgid" ]; then
            kill -TERM -- "-$pid" 2>/dev/null || true
        fi
        kill -TERM "$pid" 2>/dev/null || true
    done
    for i in $(seq 1 30); do
        [ -n "$(run_guard_leftovers)" ] || return 1
        sleep 0.1
    done
    for pid in $(run_guard_leftovers | cut -d' ' -f1); do
        kill -KILL "$pid" 2>/dev/null || true
    done
    return 1
}

# run_guard_self_test — the check can fail: a guarded script that leaves a process behind (an
# orphan in a session of its own, as `nohup`/`setsid` servers are) must be told so (status 1,
# the process named) and the process must be gone afterwards. Status 0 when all of that holds.
run_guard_self_test() {
    local lib dir out status pid
    lib="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/run-guard.sh"
    dir="$(mktemp -d "${TMPDIR:-/tmp}/sitekeep-run-guard.XXXXXX")"
    cat >"$dir/leaves-one.sh" <<SCRIPT
#!/usr/bin/env bash
. "$lib"
run_guard_init "$dir/leaves-one.sh"
bash -c 'setsid sleep 600 </dev/null >/dev/null 2>&1 &'
run_guard_reap "run-guard self-test"
SCRIPT
    status=0
    out="$(bash "$dir/leaves-one.sh" 2>&1)" || status=$?
    rm -rf "$dir"
    pid="$(printf '%s\n' "$out" | sed -n 's/^  pid \([0-9]*\): sleep 600$/\1/p')"
    if [ "$status" -ne 1 ] || [ -z "$pid" ]; then
        printf 'run-guard: self-test FAILED: a process left behind was not reported (status %s):\n%s\n' "$status" "$out" >&2
        return 1
    fi
    if kill -0 "$pid" 2>/dev/null; then
        echo "run-guard: self-test FAILED: the leftover (pid $pid) is still running" >&2
        kill -9 "$pid" 2>/dev/null || true
        return 1
    fi
    echo "run-guard: self-test passed (a process left behind was named, ended, and failed its run)"
}
