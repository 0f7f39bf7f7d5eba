import Foundation
import SiteKeepSystem
public import SiteKeepPartitions

/// The package's executables as `swift build` left them (`.build/debug`), and the reference
/// tools the tests run, found from this file's own path, so they work from any test target and
/// any working directory.
public enum BuiltProducts {
    /// This checkout's `.build/debug` folder.
    public static var folder: String { root.appendingPathComponent(".build/debug").path }

    /// The package root (two folders above this file).
    static var root: URL {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<2 { dir = dir.deletingLastPathComponent() }
        return dir
    }

    /// The built executable `name`, nil when it has not been built.
    public static func executable(_ name: String) -> String? {
        let candidate = folder + "/" + name
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    /// `sitekeep`, the front end (it runs a command in its store's daemon, else execs the whole tool).
    public static var sitekeep: String? { executable("sitekeep") }

    /// `sitekeep-main`, the whole tool in a process of its own (it sends no command to a daemon
    /// to run; `unlock`, `lock` and `status` still talk to the store's daemon).
    public static var sitekeepMain: String? { executable("sitekeep-main") }

    /// The reference sgit CLI: `SITEKEEP_TEST_SGIT`, else `.venv/bin/sgit` in the package (tools/setup).
    public static var sgit: String? {
        if let p = ProcessInfo.processInfo.environment["SITEKEEP_TEST_SGIT"], FileManager.default.isExecutableFile(atPath: p) { return p }
        let candidate = root.appendingPathComponent(".venv/bin/sgit").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }
}

/// The test runner as a site's host: a daemon binds a site's bridge connection only for the
/// site's hosts (the SiteKeep browser, and the programs added with `--host`), and the tests that
/// call the bridge from the test process add it so.
public enum TestHost {
    /// This test process's executable.
    public static let runner: String = ProcessEnvironment.executablePath() ?? "/proc/self/exe"
    /// `site add` arguments that make the test runner a host of the site.
    public static var arguments: [String] { ["--host", runner] }
    /// The same, for ``SiteRegistry/add(displayName:origins:appBound:protection:hosts:)``.
    public static func hosts() throws -> [SiteHost] { [try SiteHost.adding(runner)] }
}
