import Foundation
import Glibc
import Testing
import SiteKeepCrypto
import SiteKeepJSON
import SiteKeepKeyring
@testable import SiteKeepCustody

/// Hardening as an attacker would check it: a running `sitekeep` has no core dumps and is not
/// dumpable, and a crafted slot header cannot make unlock spend more than the Argon2id ceiling.
///
/// The third check of the issue, that `SecretBytes` pages are inaccessible between uses, is
/// `SecretBytesTests.readingOutsideTheScopeKillsTheProcess` (with its control
/// `readingInsideTheScopeIsFine`) in Tests/SiteKeepCryptoTests/SecretAndEncodingTests.swift.
@Suite struct HardeningTests {
    /// `sitekeep doctor --json`, run as its own process, reports core dumps off and the process
    /// not dumpable.
    @Test func doctorInAChildReportsNoCoreDumpsAndNotDumpable() throws {
        let exe = try #require(builtExecutable("sitekeep"), "the sitekeep executable is not built; run `swift build` first")
        let f = try TempFolder("doctor")
        let r = try Child.run(exe, ["doctor", "--json", "--keyring", "file", "--home", f.path + "/home"], in: f.path)
        let report = try JSONParser.parse(r.out)
        guard case .array(let checks)? = report["checks"] else { Issue.record("no checks in \(r.out)"); return }
        for name in ["core dumps off", "not dumpable"] {
            let check = checks.first { $0["name"]?.stringValue == name }
            #expect(check?["ok"] == .bool(true), "\(name): \(String(describing: check))")
        }
    }

    /// A live `sitekeep` (blocked reading a message from stdin) seen from outside: its core file
    /// limit is 0, and its /proc files that would expose memory or environment are closed to us
    /// (non-dumpable processes' /proc entries belong to root).
    @Test func aRunningSitekeepHasNoCoreLimitAndClosedProcFiles() throws {
        let exe = try #require(builtExecutable("sitekeep"), "the sitekeep executable is not built; run `swift build` first")
        let f = try TempFolder("proc")
        let fifo = f.path + "/stdin"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Opened read-write by the child itself: never blocks, never reaches end of file.
        let child = try Child(exe, ["team", "sign", "k", "--message-file", "-", "--home", f.path + "/home", "--keyring", "file"],
                              stdoutPath: f.path + "/out", stderrPath: f.path + "/err", stdinPath: fifo, stdinMode: O_RDWR)
        defer { child.kill9() }
        // Wait until it has exec'd and hardened itself (its /proc/pid/environ turns root-owned).
        var st = stat()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if stat("/proc/\(child.pid)/environ", &st) == 0, st.st_uid == 0 || getuid() == 0 { break }
            usleep(5_000)
        }
        #expect(!child.hasExited, "sitekeep exited early: \(child.stderr)")
        // PR_SET_DUMPABLE comes first, setrlimit a moment later: poll the limit (bounded).
        func coreLimit() -> [Substring] {
            let limits = (try? String(contentsOfFile: "/proc/\(child.pid)/limits", encoding: .utf8)) ?? ""
            let line = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
            return Array(line?.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) ?? [])
        }
        let limitDeadline = Date().addingTimeInterval(5)
        while coreLimit() != ["0", "0"] && Date() < limitDeadline && !child.hasExited { usleep(5_000) }
        #expect(coreLimit() == ["0", "0"], "soft and hard core limits: \(coreLimit())")
        if getuid() != 0 {
            #expect(open("/proc/\(child.pid)/environ", O_RDONLY) < 0, "a non-dumpable process's environ must not be readable")
            #expect(open("/proc/\(child.pid)/mem", O_RDONLY) < 0)
        }
        let status = (try? String(contentsOfFile: "/proc/\(child.pid)/status", encoding: .utf8)) ?? ""
        #expect(status.contains("Name:"), "status readable: \(status.prefix(40))")
    }

    // "The daemon refuses a peer of another uid" is SiteKeepBridgeTests' ServerTests
    // refusesAPeerOfAnotherUser (setpriv as nobody); tools/attack runs it with the socket tests.

    /// A slot header rewritten to ask for Argon2id memory or passes above the ceiling (1 GiB,
    /// t = 10, t·m = 4 GiB) is refused before any derivation: unlock fails as fast as a wrong
    /// passphrase, without allocating the memory.
    @Test(arguments: [(UInt32(2), UInt32(4 << 20)), (UInt32(0xFFFF_FFFF), UInt32(19 << 10)), (UInt32(8), UInt32(1 << 20))])
    func craftedArgon2ParametersAboveTheCeilingAreRefusedFast(iterations: UInt32, memoryKiB: UInt32) async throws {
        let f = try TempFolder("ceiling")
        let home = f.path + "/home"
        let pass = try f.file("pass.txt", Array("ceiling passphrase".utf8))
        let made = await runTool(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19",
                                  "--no-recovery", "--home", home, "--keyring", "file"])
        try #require(made.status == 0, "init: \(made.err)")
        let keyring = try FileKeyring(home: StoreHome(path: home))
        let storeID = try Custodian(home: StoreHome(path: home), keyring: keyring).storeID
        let item = try #require(try keyring.list(store: storeID, kind: Custodian.ItemKind.slot).first)
        let blob = try SlotBlob.parse(try keyring.load(item))
        var header = blob.headerBytes
        // Patch the 4-byte big-endian values of fields 8 (iterations) and 9 (memory KiB).
        var i = 4
        while i + 3 <= header.count {
            let tag = header[i], len = Int(header[i + 1]) << 8 | Int(header[i + 2])
            let value = tag == 8 ? iterations : (tag == 9 ? memoryKiB : nil)
            if let value, len == 4 {
                for b in 0..<4 { header[i + 3 + b] = UInt8((value >> (8 * UInt32(3 - b))) & 0xff) }
            }
            i += 3 + len
        }
        #expect(header != blob.headerBytes)
        #expect(throws: CustodyError.self) { try SlotHeader.parse(header) }
        try keyring.store(SlotBlob(headerBytes: header, wrappedMaster: blob.wrappedMaster).encoded(), for: item, label: "crafted")

        var before = rusage(); getrusage(RUSAGE_SELF.rawValue, &before)
        let start = ContinuousClock.now
        let r = await runTool(["team", "add", "x", "--passphrase-file", pass, "--home", home, "--keyring", "file"])
        let elapsed = ContinuousClock.now - start
        var after = rusage(); getrusage(RUSAGE_SELF.rawValue, &after)
        #expect(r.status == 1, "the crafted slot must not open: \(r.err)")
        #expect(elapsed < .seconds(3), "unlock took \(elapsed): the crafted parameters were used")
        // The process's peak RSS (KiB) did not grow by anything near the crafted memory.
        #expect(after.ru_maxrss - before.ru_maxrss < 512 * 1024)
        #expect(throws: CryptoError.self) { try Argon2id.Parameters(iterations: Int(iterations), memoryKiB: Int(memoryKiB)) }
    }
}
