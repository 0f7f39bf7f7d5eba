# shellcheck shell=bash
# tools/lib/swtpm.sh — a software TPM 2.0 (swtpm, libtpms) on loopback TCP for the TPM slot tests.
#
#   swtpm_start DIR     # starts swtpm with its state in DIR; sets SWTPM_TCTI and SWTPM_PID
#   swtpm_stop          # stops it by process id (SIGTERM, then SIGKILL: swtpm 0.7 sees SIGTERM
#                       # only at its next connection)
#
# The tests reach it through SITEKEEP_TPM_TCTI=swtpm:host=127.0.0.1,port=P, the same tpm2-tss
# TCTI loader a machine's /dev/tpmrm0 goes through.

# shellcheck source=tools/lib/run-guard.sh
. "$(dirname "${BASH_SOURCE[0]}")/run-guard.sh"   # run_guard_exec_tied: swtpm ends with the script

SWTPM_PID=""

swtpm_start() {
    local dir=$1 port i
    command -v swtpm >/dev/null 2>&1 || { echo "swtpm: not installed (tools/setup installs swtpm)" >&2; return 1; }
    mkdir -p "$dir"
    # An even port P with P and P + 1 free (the TPM's and the control channel's).
    port=$(python3 -c 'import random, socket
for _ in range(50):
    p = random.randrange(20000, 60000, 2)
    try:
        a = socket.socket(); a.bind(("127.0.0.1", p)); b = socket.socket(); b.bind(("127.0.0.1", p + 1))
        a.close(); b.close(); print(p); break
    except OSError:
        pass')
    [ -n "$port" ] || { echo "swtpm: no free port pair" >&2; return 1; }
    (run_guard_exec_tied "$(command -v swtpm)" socket --tpm2 --server "type=tcp,port=$port,bindaddr=127.0.0.1" --ctrl "type=tcp,port=$((port + 1)),bindaddr=127.0.0.1" \
        --tpmstate "dir=$dir" --flags not-need-init,startup-clear >"$dir/swtpm.log" 2>&1) &
    SWTPM_PID=$!
    for i in $(seq 1 100); do
        if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2).close()" 2>/dev/null; then
            SWTPM_TCTI="swtpm:host=127.0.0.1,port=$port"
            return 0
        fi
        kill -0 "$SWTPM_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "swtpm: did not listen on 127.0.0.1:$port (see $dir/swtpm.log)" >&2
    swtpm_stop
    return 1
}

swtpm_stop() {
    [ -n "$SWTPM_PID" ] || return 0
    kill "$SWTPM_PID" 2>/dev/null || true
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 "$SWTPM_PID" 2>/dev/null || break
        sleep 0.05
    done
    kill -9 "$SWTPM_PID" 2>/dev/null || true
    wait "$SWTPM_PID" 2>/dev/null || true
    SWTPM_PID=""
}
