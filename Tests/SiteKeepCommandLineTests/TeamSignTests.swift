import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepTestSupport

/// `team sign` refuses arguments it cannot honour before the key is used: a refused command
/// leaves no signature made and no `ok` line for it in the audit log (issue 45).
@Suite struct TeamSignTests {
    /// The `team.sign` lines of the store's audit log, as `result` words.
    static func signLines(_ store: CLIStore) throws -> [String] {
        let text = (try? String(contentsOfFile: store.home + "/audit.log", encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").compactMap { line in
            let entry = try JSONParser.parse(Array(line.utf8))
            return entry["op"]?.stringValue == "team.sign" ? entry["result"]?.stringValue ?? "?" : nil
        }
    }

    /// `--der` on an Ed25519 key was refused only after the key had signed (and the audit log
    /// said `ok`); an SSH namespace that is not one was refused after the approval was asked.
    @Test func argumentsThatCannotBeHonouredAreRefusedBeforeAnyKeyUse() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        let message = try store.file("m", Array("hello".utf8))
        let refused: [([String], String)] = [
            (["--der"], "--der applies to P-256 keys only"),
            (["--ssh-namespace", "has space"], "is not an SSH namespace"),
            (["--ssh-namespace", "git", "--der"], "different signature forms"),
        ]
        for (extra, why) in refused {
            let r = await store.run(["team", "sign", "summit", "--message-file", message, "--passphrase-file", store.passFile] + extra)
            #expect(r.status != 0 && r.err.contains(why), "\(extra): \(r.status) \(r.err)")
            #expect(r.out.isEmpty, "\(extra) printed \(r.out)")
            let used = try Self.signLines(store)
            #expect(used.isEmpty, "\(extra) used the key: \(used)")
        }
        // A one-shot command asks for nothing first: --der on an Ed25519 key is refused before
        // the passphrase would be asked (no --passphrase-file, no terminal here).
        let asked = await store.run(["team", "sign", "summit", "--message-file", message, "--der"])
        #expect(asked.status != 0 && asked.err.contains("--der applies to P-256 keys only"), "\(asked.err)")
        #expect(try Self.signLines(store).isEmpty)
        // What it can honour still signs, once, and says so.
        let ok = await store.run(["team", "sign", "summit", "--message-file", message, "--passphrase-file", store.passFile])
        #expect(ok.status == 0, "\(ok.err)")
        #expect(try Self.signLines(store) == ["ok"])
    }
}
