import Foundation
import Glibc
import Synchronization
import Testing

/// Kill -9 during a stream of acknowledged writes, restart: every acknowledged write is there
/// and the partition passes its integrity check.
@Suite struct CrashTests {
    /// The helper sits beside the test binary (`swift build` builds it with the package).
    static var crashWriter: URL? {
        guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
        let url = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("sitekeep-crashwriter")
        return FileManager.default.isExecutableFile(atPath: url.path) ? url : nil
    }

    /// Runs the writer, kills it with SIGKILL a random moment after its first acknowledgement,
    /// and returns the complete lines it printed.
    func writeUntilKilled(_ exe: URL, home: URL, key: URL, tag: String) throws -> [String] {
        let p = Process()
        p.executableURL = exe
        p.arguments = ["write", home.path, key.path, tag]
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        var buffer = Data()
        let handle = pipe.fileHandleForReading
        // Wait for the first acknowledgement (bounded), then let it run a random while.
        let deadline = Date().addingTimeInterval(20)
        while !buffer.contains(UInt8(ascii: "\n")) && Date() < deadline {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
        }
        usleep(UInt32.random(in: 20_000...250_000))
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        buffer.append(handle.readDataToEndOfFile())
        #expect(p.terminationReason == .uncaughtSignal)
        // Only newline-terminated lines were acknowledged.
        let text = String(decoding: buffer, as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines.removeLast()  // the part after the last newline (possibly empty)
        return lines
    }

    @Test func acknowledgedWritesSurviveKill9() throws {
        let exe = try #require(Self.crashWriter, "sitekeep-crashwriter not built; run `swift build` first")
        let dir = TempDir()
        let home = dir.url.appendingPathComponent("home")
        let key = dir.url.appendingPathComponent("key")
        var acked: [String] = []
        for round in 0..<5 {
            let lines = try writeUntilKilled(exe, home: home, key: key, tag: "r\(round)")
            #expect(!lines.isEmpty)
            #expect(lines.allSatisfy { $0.hasPrefix("r\(round)-") })
            acked += lines
            let ackFile = dir.url.appendingPathComponent("acks")
            try acked.joined(separator: "\n").write(to: ackFile, atomically: true, encoding: .utf8)
            let verify = Process()
            verify.executableURL = exe
            verify.arguments = ["verify", home.path, key.path, ackFile.path]
            let out = Pipe()
            verify.standardOutput = out
            try verify.run()
            let report = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            verify.waitUntilExit()
            #expect(verify.terminationStatus == 0, "round \(round): \(report)")
            #expect(report.contains("OK \(acked.count)"), "round \(round): \(report)")
        }
    }
}
