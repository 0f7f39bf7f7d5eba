# tools/lib/keyring-session.sh — a private D-Bus session bus with an unlocked gnome-keyring
# Secret Service in a throw-away HOME, for tools/test, tools/sanitize and tools/attack.
# Source it, then:
#
#   keyring_session_start              # makes $KEYRING_SANDBOX (HOME of everything inside)
#   keyring_session_run CMD [ARG...]   # runs CMD inside; returns its exit status
#   keyring_session_stop               # ends what was started inside (by pid), removes the sandbox
#
# HOME and XDG_RUNTIME_DIR are set BEFORE dbus-run-session: services the bus activates inherit
# the bus daemon's environment, and must write into the sandbox, not the real HOME. Inside,
# SITEKEEP_TEST_SECRET_SERVICE=1 tells the keyring tests the real Secret Service is there.

KEYRING_SANDBOX=""

keyring_session_start() {
    KEYRING_SANDBOX="$(mktemp -d "${TMPDIR:-/tmp}/sitekeep-test.XXXXXX")"
    mkdir -m 0700 "$KEYRING_SANDBOX/run"
}

keyring_session_run() {
    [ -n "$KEYRING_SANDBOX" ] || { echo "keyring-session: call keyring_session_start first" >&2; return 70; }
    env HOME="$KEYRING_SANDBOX" XDG_RUNTIME_DIR="$KEYRING_SANDBOX/run" \
        XDG_DATA_HOME="$KEYRING_SANDBOX/.local/share" XDG_CONFIG_HOME="$KEYRING_SANDBOX/.config" \
        XDG_CACHE_HOME="$KEYRING_SANDBOX/.cache" \
        dbus-run-session -- bash -c '
            echo -n pw | gnome-keyring-daemon --unlock --components=secrets >/dev/null
            # Prove the private Secret Service answers before any test relies on it.
            if ! { echo -n probe | secret-tool store --label=sitekeep-probe sitekeep-probe 1 &&
                   [ "$(secret-tool lookup sitekeep-probe 1)" = probe ] &&
                   secret-tool clear sitekeep-probe 1; } >/dev/null 2>&1; then
                echo "keyring-session: the private gnome-keyring Secret Service did not answer (is gnome-keyring installed? run tools/setup)" >&2
                exit 70
            fi
            export SITEKEEP_TEST_SECRET_SERVICE=1
            exec "$@"
        ' keyring-session "$@" \
        2> >(grep --line-buffered -v -e 'Failed to set fd limit' -e 'prohibited flag(s): -pthread' >&2)
}

keyring_session_stop() {
    [ -n "$KEYRING_SANDBOX" ] || return 0
    # dbus-run-session ends the bus when the command returns. Anything still running that was
    # started inside the sandbox (gnome-keyring-daemon daemonises itself) is found by its HOME
    # and ended by pid, never by name, so nothing outside the sandbox is touched.
    local envf pid
    for envf in /proc/[0-9]*/environ; do
        pid="${envf#/proc/}"; pid="${pid%/environ}"
        if tr '\0' '\n' 2>/dev/null <"$envf" | grep -qxF "HOME=$KEYRING_SANDBOX"; then
            kill "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$KEYRING_SANDBOX"
    KEYRING_SANDBOX=""
}
