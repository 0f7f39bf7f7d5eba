# shellcheck shell=bash
# tools/lib/vault-server.sh — start and stop the real vault server (SG/Send's FastAPI app,
# sgraph-ai-app-send 0.34.0 in .venv-server) on loopback ports, for the vault sync tests.
# Sourced by tools/test (and usable by hand):
#
#   . tools/lib/vault-server.sh
#   vault_server_start disk DIR     # sets VAULT_SERVER_URL, VAULT_SERVER_PID, VAULT_SERVER_TOKEN
#   vault_server_start s3 DIR       # the same, on S3 storage through moto (a MOCK of the S3 API,
#                                   # started here too: sets MOTO_PID, MOTO_URL)
#   vault_server_stop               # stops what was started, by process id
#
# SEND__STORAGE_MODE is always set: with AWS credentials in the environment the app would
# otherwise switch to S3 on its own.
#
# No secret is ever on a command line (/proc/PID/cmdline is world-readable; environ is not): the
# server's environment is exported by the subshell that execs it, never given to `env`, and
# curl reads the access token's header from its config on stdin (-K -), written by printf, a
# builtin. tools/check-argv-secrets holds every script in tools/ to that.

# shellcheck source=tools/lib/run-guard.sh
. "$(dirname "${BASH_SOURCE[0]}")/run-guard.sh"   # run_guard_exec_tied: the servers end with the script

VAULT_SERVER_VENV="${VAULT_SERVER_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.venv-server}"
VAULT_SERVER_PIDS=()

vault_free_port() {
    "$VAULT_SERVER_VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# vault_wait_http URL [TOKEN] — waits up to 60 s for URL to answer at all (sending TOKEN as the
# server's access token header, from curl's config on stdin).
vault_wait_http() {
    local url=$1 token=${2:-} i
    for i in $(seq 1 300); do
        if { [ -z "$token" ] || printf 'header = "x-sgraph-access-token: %s"\n' "$token"; } \
            | curl -s -o /dev/null -m 2 -K - "$url"; then return 0; fi
        sleep 0.2
    done
    echo "vault-server: $url did not answer within 60 s" >&2
    return 1
}

vault_server_start() {
    local mode=$1 dir=$2 port
    mkdir -p "$dir"
    VAULT_SERVER_TOKEN="${VAULT_SERVER_TOKEN:-sitekeep-test-token-$RANDOM$RANDOM}"
    port=$(vault_free_port)
    local -a env=(SEND__STORAGE_MODE="$mode")
    if [ "$mode" = s3 ]; then
        # moto: a mock of the S3 API (not S3), on its own loopback port.
        local mport
        mport=$(vault_free_port)
        (run_guard_exec_tied "$VAULT_SERVER_VENV/bin/moto_server" -H 127.0.0.1 -p "$mport" >"$dir/moto.log" 2>&1) &
        MOTO_PID=$!
        VAULT_SERVER_PIDS+=("$MOTO_PID")
        MOTO_URL="http://127.0.0.1:$mport"
        vault_wait_http "$MOTO_URL" || return 1
        AWS_ACCESS_KEY_ID=sitekeep-test AWS_SECRET_ACCESS_KEY=sitekeep-test AWS_DEFAULT_REGION=us-east-1 \
            "$VAULT_SERVER_VENV/bin/python" -c "import boto3; boto3.client('s3', endpoint_url='$MOTO_URL').create_bucket(Bucket='sitekeep-test-vaults')" \
            || { echo "vault-server: could not create the bucket in moto" >&2; return 1; }
        env+=(SEND__S3_BUCKET=sitekeep-test-vaults AWS_ENDPOINT_URL="$MOTO_URL" AWS_ACCESS_KEY_ID=sitekeep-test
              AWS_SECRET_ACCESS_KEY=sitekeep-test AWS_DEFAULT_REGION=us-east-1)
    else
        env+=(SEND__DISK_PATH="$dir/data")
    fi
    # shellcheck disable=SC2163 # each element is NAME=VALUE: export it as such
    (cd "$dir" && unset AWS_PROFILE && export "${env[@]}" && export SGRAPH_SEND__ACCESS_TOKEN="$VAULT_SERVER_TOKEN" \
        && run_guard_exec_tied "$VAULT_SERVER_VENV/bin/uvicorn" \
        sgraph_ai_app_send__docker.app:create_app --factory --host 127.0.0.1 --port "$port" >"$dir/server.log" 2>&1) &
    VAULT_SERVER_PID=$!
    VAULT_SERVER_PIDS+=("$VAULT_SERVER_PID")
    VAULT_SERVER_URL="http://127.0.0.1:$port"
    vault_wait_http "$VAULT_SERVER_URL/api/vault/list/healthcheck1" "$VAULT_SERVER_TOKEN" || {
        tail -20 "$dir/server.log" >&2; return 1; }
}

# vault_server_stop — SIGTERM to each process started here, by pid; what has not exited 10 s
# later (uvicorn's graceful shutdown waits for open connections) gets SIGKILL. Then reaped.
vault_server_stop() {
    local pid i alive
    for pid in "${VAULT_SERVER_PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for i in $(seq 1 100); do
        alive=0
        for pid in "${VAULT_SERVER_PIDS[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive=1
        done
        [ "$alive" -eq 1 ] || break
        [ "$i" -eq 100 ] || sleep 0.1
    done
    for pid in "${VAULT_SERVER_PIDS[@]}"; do
        kill -0 "$pid" 2>/dev/null && { echo "vault-server: pid $pid did not stop on SIGTERM within 10 s; SIGKILL" >&2; kill -9 "$pid" 2>/dev/null; }
        wait "$pid" 2>/dev/null || true
    done
    VAULT_SERVER_PIDS=()
}
