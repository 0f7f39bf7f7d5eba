import Foundation
import SiteKeepBridge

/// `key.sign` over the daemon's socket against `ssh-agent` signing with the same algorithm over
/// its socket, driven by the same client harness in the same run (`BridgeBenchmark`):
/// requests per second with one connection and with four, p50 and p99 latency. The bridge side
/// includes the presence window and the audit line written before each signature returns.
func bridgeGroup(_ settings: Settings) throws -> [Row] {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-bench-bridge-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(at: dir) }
    if !settings.quiet { FileHandle.standardError.write(Data("  bridge: key.sign vs ssh-agent (Ed25519, P-256; 1 and 4 connections)\n".utf8)) }
    let report = try BridgeBenchmark.run(requests: 4000, connections: 4, workDir: dir.path)
    bridgeMarkdown = report.markdown
    return []
}

/// The last bridge run, printed by the driver.
nonisolated(unsafe) var bridgeMarkdown = ""
