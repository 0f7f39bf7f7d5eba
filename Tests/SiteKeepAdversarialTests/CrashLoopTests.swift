import Foundation
import Glibc
import Testing
import SiteKeepJSON
import SiteKeepKeyring
import SiteKeepCustody

/// kill -9 loops: a child process is killed at a random moment of a write, again and again, and
/// after every kill the store must be whole: nothing acknowledged lost, nothing half-written.
@Suite struct CrashLoopTests {
    /// `sitekeep slot add passphrase` and `sitekeep slot passphrase` killed at random moments:
    /// afterwards the store unlocks with the old or the new passphrase (the new one whenever the
    /// command had finished), no slot item is damaged, and the audit log's chain verifies.
    @Test func slotChangesSurviveKill9() async throws {
        let exe = try #require(builtExecutable("sitekeep"), "the sitekeep executable is not built; run `swift build` first")
        let f = try TempFolder("slotcrash")
        let home = f.path + "/home"
        var current = "first passphrase \(UUID().uuidString.prefix(6))"
        var passFile = try f.file("pass-0.txt", Array(current.utf8))
        let created = await runTool(["init", "--passphrase-file", passFile, "--argon2-iterations", "2", "--argon2-memory", "19",
                                     "--no-recovery", "--json", "--home", home, "--keyring", "file"])
        try #require(created.status == 0, "init: \(created.err)")

        func passphraseSlots() async throws -> [String] {
            let r = await runTool(["slot", "list", "--json", "--home", home, "--keyring", "file"])
            guard case .array(let rows) = try JSONParser.parse(r.out) else { return [] }
            return rows.filter { $0["kind"]?.stringValue == "passphrase" }
                .sorted { ($0["created"]?.intValue ?? 0, $0["id"]?.stringValue ?? "") < ($1["created"]?.intValue ?? 0, $1["id"]?.stringValue ?? "") }
                .compactMap { $0["id"]?.stringValue }
        }
        func unlocks(_ file: String) async -> Bool {
            await runTool(["unlock", "--passphrase-file", file, "--json", "--home", home, "--keyring", "file"]).status == 0
        }

        var window = 0.0   // measured from round 0, which runs to completion
        var killed = 0, finished = 0
        let rounds = Attack.rounds + 1
        for round in 0..<rounds {
            let next = "passphrase r\(round) \(UUID().uuidString.prefix(6))"
            let nextFile = try f.file("pass-\(round + 1).txt", Array(next.utf8))
            let slots = try await passphraseSlots()
            // Add while there are few passphrase slots, else change the newest (keeps unlock cheap).
            let args = slots.count < 2
                ? ["slot", "add", "passphrase"]
                : ["slot", "passphrase", slots[slots.count - 1]]
            let child = try Child(exe, args + ["--passphrase-file", passFile, "--new-passphrase-file", nextFile,
                                               "--home", home, "--keyring", "file"],
                                  stdoutPath: f.path + "/out", stderrPath: f.path + "/err")
            let start = Date()
            if round == 0 {
                let r = child.wait()
                window = Date().timeIntervalSince(start)
                #expect(r.code == 0, "round 0 must finish: \(child.stderr)")
            } else {
                let delay = Double.random(in: 0...(window * 1.1))
                while !child.hasExited && Date().timeIntervalSince(start) < delay { usleep(2_000) }
                if !child.hasExited { child.kill9() }
            }
            let result = child.wait()
            let completed = result.code == 0
            if completed { finished += 1 } else { killed += 1 }
            #expect(result.code == 0 || result.signal == SIGKILL, "round \(round): \(args) ended \(result): \(child.stderr)")

            // Whole afterwards: no damaged slot, the chain verifies, old or new passphrase opens.
            let custodian = try Custodian(home: StoreHome(path: home), keyring: try FileKeyring(home: StoreHome(path: home)))
            #expect(try custodian.damagedSlotIDs().isEmpty, "round \(round): a slot item was half-written")
            let order = completed ? [(next, nextFile), (current, passFile)] : [(current, passFile), (next, nextFile)]
            var opened: (String, String)? = nil
            for candidate in order where await unlocks(candidate.1) { opened = candidate; break }
            #expect(opened != nil, "round \(round): neither the old nor the new passphrase unlocks after kill -9 of \(args)")
            if completed { #expect(opened?.0 == next, "round \(round): \(args) finished but the new passphrase does not unlock") }
            let log = await runTool(["log", "verify", "--json", "--home", home, "--keyring", "file"])
            #expect(log.status == 0, "round \(round): log verify: \(log.out) \(log.err)")
            if let opened { (current, passFile) = opened } else { break }
        }
        #expect(killed + finished == rounds)
        Attack.report("crash-slots", "\(rounds) slot add/change runs, \(killed) killed mid-way with kill -9, \(finished) finished; store whole after each")
    }

    /// The partitions' crash writer (`sitekeep-crashwriter`) killed at random moments: every
    /// acknowledged write is there afterwards and the partition passes its integrity check.
    @Test func partitionWritesSurviveKill9() throws {
        let exe = try #require(builtExecutable("sitekeep-crashwriter"), "sitekeep-crashwriter is not built; run `swift build` first")
        let f = try TempFolder("partcrash")
        let home = f.path + "/home", key = f.path + "/key", acks = f.path + "/acks"
        var acked: [String] = []
        let rounds = Attack.rounds + 1
        for round in 0..<rounds {
            let out = f.path + "/out-\(round)"
            let child = try Child(exe, ["write", home, key, "r\(round)"], stdoutPath: out, stderrPath: f.path + "/err")
            // Wait for the first acknowledgement (bounded), then a random while.
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline, !child.hasExited, !child.stdout.contains(0x0a) { usleep(2_000) }
            usleep(UInt32.random(in: 1_000...300_000))
            child.kill9()
            #expect(child.wait().signal == SIGKILL, "round \(round): the writer stopped by itself: \(child.stderr)")
            var lines = String(decoding: child.stdout, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            lines.removeLast()   // after the last newline: not acknowledged
            #expect(!lines.isEmpty && lines.allSatisfy { $0.hasPrefix("r\(round)-") })
            acked += lines
            try acked.joined(separator: "\n").write(toFile: acks, atomically: true, encoding: .utf8)
            let verify = try Child.run(exe, ["verify", home, key, acks], in: f.path)
            let report = String(decoding: verify.out, as: UTF8.self)
            #expect(verify.code == 0 && report.contains("OK \(acked.count)"), "round \(round): \(report) \(verify.err)")
        }
        Attack.report("crash-partitions", "\(rounds) writer runs killed with kill -9, \(acked.count) acknowledged writes all present, integrity checks passed")
    }
}
