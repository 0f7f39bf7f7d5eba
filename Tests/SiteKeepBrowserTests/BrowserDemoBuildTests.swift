import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// How `tools/demo --browser` builds the browser (tools/lib/browser-build.sh), against a stand-in
/// `swift` on PATH: a failed build stops the step and shows the compiler's errors, a build that
/// succeeds says nothing, and the package is named (the demo runs in its own folder, not the repo).
@Suite struct BrowserDemoBuildTests {
    /// Runs `browser_build REPO` with a `swift` that prints `output` and exits with `status`;
    /// the function's status and output, and the arguments and SITEKEEP_BROWSER `swift` saw.
    func build(swiftPrints output: String, exiting status: Int32) throws -> (status: Int32, out: String, called: String) {
        let dir = try mkdtempPath("sitekeep-demo-build")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        mkdir(dir + "/bin", 0o700)
        try output.write(toFile: dir + "/swift-output", atomically: true, encoding: .utf8)
        try """
            #!/bin/sh
            printf 'SITEKEEP_BROWSER=%s %s\\n' "$SITEKEEP_BROWSER" "$*" > '\(dir)/called'
            cat '\(dir)/swift-output'
            exit \(status)

            """.write(toFile: dir + "/bin/swift", atomically: true, encoding: .utf8)
        chmod(dir + "/bin/swift", 0o700)
        let lib = BrowserRig.repo.appendingPathComponent("tools/lib/browser-build.sh").path
        let r = try Spawned.run("/bin/bash", ["-c", #". "$0" && browser_build /the/repo 2>&1; echo "status $?""#, lib],
                                env: ["PATH": dir + "/bin:/usr/bin:/bin", "HOME": dir])
        let called = (try? String(contentsOfFile: dir + "/called", encoding: .utf8)) ?? ""
        let status = r.out.components(separatedBy: "\n").last { $0.hasPrefix("status ") }.flatMap { Int32($0.dropFirst(7)) } ?? -1
        return (status, r.out, called)
    }

    @Test func aFailedBuildStopsWithTheCompilersErrors() throws {
        let r = try build(swiftPrints: """
            Building for debugging...
            [3/9] Compiling sitekeep_browser Browser.swift
            /the/repo/Sources/sitekeep-browser/Browser.swift:12:5: error: cannot find 'nope' in scope
             12 |     nope()
                |     `- error: cannot find 'nope' in scope
            error: fatalError

            """, exiting: 1)
        #expect(r.status == 1, "\(r.out)")
        #expect(r.out.contains("Browser.swift:12:5: error: cannot find 'nope' in scope") && r.out.contains(" 12 |     nope()"),
                "the compiler's errors are not shown: \(r.out)")
        #expect(r.out.contains("sitekeep-browser did not build") && r.out.contains("tools/setup --browser"), "\(r.out)")
        #expect(!r.out.contains("[3/9] Compiling") && !r.out.contains("Building for debugging"), "SwiftPM's progress is shown: \(r.out)")
        #expect(r.called == "SITEKEEP_BROWSER=1 build --package-path /the/repo --product sitekeep-browser\n", "\(r.called)")
    }

    @Test func aBuildThatSucceedsSaysNothing() throws {
        let r = try build(swiftPrints: """
            Building for debugging...
            [5/5] Linking sitekeep-browser
            warning: 'repo': found 1 file(s) which are unhandled
            Build of product 'sitekeep-browser' complete! (6.35s)

            """, exiting: 0)
        #expect(r.status == 0)
        #expect(r.out == "status 0", "a successful build printed: \(r.out)")
        #expect(r.called.contains("--package-path /the/repo --product sitekeep-browser"), "\(r.called)")
    }

    /// The demo's browser step goes through it and stops when it fails.
    @Test func theDemoStopsWhenTheBrowserDoesNotBuild() throws {
        let demo = try String(contentsOf: BrowserRig.repo.appendingPathComponent("tools/demo"), encoding: .utf8)
        let sourced = demo.contains(#". "$REPO/tools/lib/browser-build.sh""#), stops = demo.contains(#"browser_build "$REPO" || exit 1"#)
        let builtOtherwise = demo.contains("--product sitekeep-browser")
        #expect(sourced && stops, "tools/demo does not build the browser with browser_build, stopping when it fails")
        #expect(!builtOtherwise, "tools/demo builds the browser some other way too")
    }
}
