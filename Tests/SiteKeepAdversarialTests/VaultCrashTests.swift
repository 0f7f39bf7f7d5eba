import Foundation
import Glibc
import Testing
import SiteKeepJSON

/// kill -9 during vault writes: `sitekeep vault write` is killed at random moments, again and
/// again. After every kill SiteKeep opens and verifies the vault; at the end the real sgit
/// reads it (`check fsck`, `check verify`, `cat`), and every write that was acknowledged (the
/// command exited 0) is in HEAD — or a later write of the same path that may have landed just
/// before its kill.
@Suite struct VaultCrashTests {
    @Test func vaultWritesSurviveKill9() async throws {
        let exe = try #require(builtExecutable("sitekeep"), "the sitekeep executable is not built; run `swift build` first")
        let sgit = try sgitPath()
        let f = try TempFolder("vaultcrash")
        let home = f.path + "/home", vault = f.path + "/vault"
        let pass = try f.file("pass.txt", Array("crash test phrase\n".utf8))
        func tool(_ args: [String], stdin: [UInt8] = []) async -> ToolRun {
            await runTool(args + ["--home", home, "--keyring", "file"], stdin: stdin)
        }
        #expect(await tool(["init", "--passphrase-file", pass, "--argon2-iterations", "2", "--argon2-memory", "19", "--no-recovery"]).status == 0)
        let sgitHome = f.path + "/sgit-home"
        let made = try Child.run(sgit, ["init", vault, "--vault-key", "crash vault phrase:crash123"], in: f.path, environment: ["HOME": sgitHome])
        try #require(made.code == 0, "sgit init: \(made.err)")
        let key = try f.file("vault.key", Array("crash vault phrase:crash123".utf8))
        let added = await tool(["vault", "add", "c", "--path", vault, "--key-file", key, "--passphrase-file", pass])
        try #require(added.status == 0, "vault add: \(added.err)")

        // Per path: the content of the last acknowledged write, and later writes that were
        // killed (any of which may have committed before the kill).
        var acked: [String: String] = [:]
        var maybe: [String: [String]] = [:]
        var window = 0.0, killed = 0, finished = 0
        let rounds = max(12, Attack.rounds * 3)
        for round in 0..<rounds {
            let path = "f\(round % 4).txt"
            let content = "round \(round) \(UUID().uuidString)\n"
            let src = try f.file("in-\(round).txt", Array(content.utf8))
            let child = try Child(exe, ["vault", "write", "c", path, "--file", src, "--passphrase-file", pass,
                                        "--home", home, "--keyring", "file"],
                                  stdoutPath: f.path + "/out", stderrPath: f.path + "/err")
            let start = Date()
            if round % 4 == 0 {
                // Every fourth round runs to the end (so writes after kills are acknowledged too,
                // however slow a loaded machine makes the others) and measures the window.
                let r = child.wait()
                window = max(window, Date().timeIntervalSince(start))
                #expect(r.code == 0, "round \(round) must finish: \(child.stderr)")
            } else {
                let delay = Double.random(in: 0...(window * 1.2))
                while !child.hasExited && Date().timeIntervalSince(start) < delay { usleep(1_000) }
                if !child.hasExited { child.kill9(); killed += 1 }
            }
            if child.wait().code == 0 {
                acked[path] = content
                maybe[path] = []
                finished += 1
            } else {
                maybe[path, default: []].append(content)
            }
            // SiteKeep opens the vault at a whole commit after every kill.
            let verify = await tool(["vault", "verify", "c", "--passphrase-file", pass, "--json"])
            #expect(verify.status == 0, "round \(round): vault verify after the kill: \(verify.err)")
            for (p, want) in acked {
                let got = await tool(["vault", "cat", "c", p, "--passphrase-file", pass])
                let text = String(decoding: got.bytes, as: UTF8.self)
                #expect(got.status == 0 && (text == want || maybe[p, default: []].contains(text)),
                        "round \(round): \(p) lost its acknowledged write: got \(text.debugDescription) \(got.err), want \(want.debugDescription) or \(maybe[p, default: []])")
            }
        }
        #expect(killed > 0 && finished > 1, "killed \(killed), finished \(finished) of \(rounds)")
        Attack.report("vault kill -9", "\(rounds) rounds, \(killed) killed mid-write, \(finished) finished")

        // The real sgit reads it whole.
        let env = ["HOME": sgitHome]
        let fsck = try Child.run(sgit, ["check", "fsck"], in: f.path, environment: env, cwd: vault)
        #expect(fsck.code == 0 && String(decoding: fsck.out, as: UTF8.self).contains("Vault OK"), "sgit fsck: \(String(decoding: fsck.out, as: UTF8.self)) \(fsck.err)")
        let verify = try Child.run(sgit, ["check", "verify"], in: f.path, environment: env, cwd: vault)
        #expect(verify.code == 0 && String(decoding: verify.out, as: UTF8.self).contains("0 bad"), "sgit verify: \(String(decoding: verify.out, as: UTF8.self))")
        for (p, want) in acked {
            let cat = try Child.run(sgit, ["cat", p], in: f.path, environment: env, cwd: vault)
            let got = String(decoding: cat.out, as: UTF8.self)
            #expect(cat.code == 0 && (got == want || maybe[p, default: []].contains(got)), "sgit cat \(p)")
        }
        // No stray temp file where sgit looks.
        for sub in ["data", "refs", "indexes", "keys"] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: vault + "/.sg_vault/bare/" + sub)) ?? []
            #expect(!names.contains { $0.contains("tmp") }, "bare/\(sub): \(names.filter { $0.contains("tmp") })")
        }
    }
}
