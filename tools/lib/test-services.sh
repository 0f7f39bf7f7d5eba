# shellcheck shell=bash
# tools/lib/test-services.sh — what the test suites need around them, started as tools/test starts
# it, for tools/test and tools/attack (each part of a run that calls `swift test` gets the same):
#
#   test_services_start WHO   # the private D-Bus session and keyring sandbox (run the tests with
#                             # keyring_session_run), the real vault server twice (disk, and S3
#                             # mode on moto, a mock of S3) and a software TPM, and exports what
#                             # the tests read: SITEKEEP_TEST_VAULT_SERVER(_S3), _VAULT_TOKEN,
#                             # _VAULT_SERVER_VENV, SITEKEEP_TPM_TCTI, SITEKEEP_TEST_SGIT
#   test_services_stop        # stops all of it by process id and removes its folders; safe to
#                             # call when nothing (or only part) was started
#
# Needs REPO set. The access token is exported (the environment, never a command line: T141).

# shellcheck source=tools/lib/keyring-session.sh
. "$REPO/tools/lib/keyring-session.sh"
# shellcheck source=tools/lib/vault-server.sh
. "$REPO/tools/lib/vault-server.sh"
# shellcheck source=tools/lib/swtpm.sh
. "$REPO/tools/lib/swtpm.sh"

VAULT_SERVER_DIR=""
SWTPM_DIR=""

test_services_start() {
    local who=${1:-test-services}
    keyring_session_start
    # The sgit reference CLI, for the vault interoperability tests.
    export SITEKEEP_TEST_SGIT="$REPO/.venv/bin/sgit"

    # The real vault server on loopback, twice: on disk storage, and on S3 storage through moto
    # (a mock of the S3 API). The tests get the URLs and the access token by environment, and may
    # start more instances of their own with SITEKEEP_TEST_VAULT_SERVER_VENV (the crash test kills
    # its own). Everything started here is stopped by process id in test_services_stop.
    VAULT_SERVER_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sitekeep-vault-server-XXXXXX")"
    vault_server_start disk "$VAULT_SERVER_DIR/disk" || { echo "$who: the vault server (disk mode) did not start"; return 1; }
    export SITEKEEP_TEST_VAULT_SERVER="$VAULT_SERVER_URL" SITEKEEP_TEST_VAULT_TOKEN="$VAULT_SERVER_TOKEN"
    vault_server_start s3 "$VAULT_SERVER_DIR/s3" || { echo "$who: the vault server (S3 mode on moto, a mock of S3) did not start"; return 1; }
    export SITEKEEP_TEST_VAULT_SERVER_S3="$VAULT_SERVER_URL" SITEKEEP_TEST_VAULT_SERVER_VENV="$VAULT_SERVER_VENV"
    echo "$who: vault server on $SITEKEEP_TEST_VAULT_SERVER (disk) and $SITEKEEP_TEST_VAULT_SERVER_S3 (S3 mode on moto, a mock of S3)"

    # A software TPM 2.0 (swtpm) on loopback for the TPM slot tests (TPMSlotTests, the CLI's
    # `slot add tpm2` / `unlock --tpm2`), reached through tpm2-tss's swtpm TCTI. The lock-out
    # test starts a private one of its own (SoftwareTPM).
    SWTPM_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sitekeep-swtpm-XXXXXX")"
    swtpm_start "$SWTPM_DIR" || { echo "$who: swtpm did not start"; return 1; }
    export SITEKEEP_TPM_TCTI="$SWTPM_TCTI"
    echo "$who: software TPM on $SITEKEEP_TPM_TCTI (pid $SWTPM_PID)"
}

test_services_stop() {
    vault_server_stop
    [ -z "$VAULT_SERVER_DIR" ] || rm -rf "$VAULT_SERVER_DIR"
    VAULT_SERVER_DIR=""
    swtpm_stop
    [ -z "$SWTPM_DIR" ] || rm -rf "$SWTPM_DIR"
    SWTPM_DIR=""
    keyring_session_stop
}
