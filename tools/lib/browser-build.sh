# tools/lib/browser-build.sh — builds sitekeep-browser for 'tools/demo --browser'. Source it, then:
#
#   browser_build REPO   # quiet when the build succeeds; when it fails, prints the compiler's
#                        # errors (SwiftPM's progress lines left out) and what failed to stderr,
#                        # and returns 1
#
# The package is named by --package-path: the demo runs in its throw-away folder, not in REPO.
browser_build() {
    local repo="$1" log
    if log="$(SITEKEEP_BROWSER=1 swift build --package-path "$repo" --product sitekeep-browser 2>&1)"; then
        return 0
    fi
    printf '%s\n' "$log" |
        grep -Ev 'prohibited flag\(s\): -pthread|^\[[0-9]+/[0-9]+\]|^Building|^Compiling|^Write|^Emitting|^Linking|^Planning' >&2 || true
    echo "demo: sitekeep-browser did not build (the compiler's errors are above); the browser step stops here" >&2
    echo "demo: it needs GTK 4 and WebKitGTK 6.0 (tools/setup --browser installs them)" >&2
    return 1
}
