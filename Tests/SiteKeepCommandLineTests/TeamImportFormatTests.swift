import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport

/// `team import` takes the key files people have (issue 47): OpenSSH private keys of Ed25519 and
/// ECDSA P-256 made by the real ssh-keygen, PKCS#8 PEM of both (made by the real openssl), and raw
/// 32-byte seeds, and names what it got; the imported key is the file's key (its OpenSSH line
/// is the one ssh-keygen wrote); an encrypted OpenSSH key is refused, saying what to do.
@Suite struct TeamImportFormatTests {
    static let keygen = "/usr/bin/ssh-keygen", openssl = "/usr/bin/openssl"
    static func have(_ paths: String...) -> Bool { paths.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) } }

    @Test(.enabled(if: have(keygen))) func openSSHKeysImportAsTheKeyTheFileHolds() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        for (type, bits, word) in [("ed25519", nil, "Ed25519"), ("ecdsa", "256", "ECDSA P-256")] as [(String, String?, String)] {
            let path = store.dir.path + "/id_\(type)"
            let made = ChildProcess.capture(Self.keygen, ["-q", "-t", type] + (bits.map { ["-b", $0] } ?? []) + ["-N", "", "-C", "me@laptop", "-f", path])
            #expect(made.status == 0, "\(made.err)")
            let r = await store.run(["team", "import", "mine-\(type)", "--key-file", path, "--passphrase-file", store.passFile])
            #expect(r.status == 0 && r.out.hasPrefix("Imported an OpenSSH \(word) key, comment \"me@laptop\", as team key mine-\(type).\n"), "\(r.out) \(r.err)")
            let line = await store.run(["team", "show", "mine-\(type)", "--ssh"])
            let written = try String(contentsOfFile: path + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
            #expect(line.out.hasPrefix(written + " "), "\(line.out) vs \(written)")
        }
        // An encrypted one is refused, naming what to do; nothing is imported.
        let locked = store.dir.path + "/id_locked"
        #expect(ChildProcess.capture(Self.keygen, ["-q", "-t", "ed25519", "-N", "a passphrase", "-f", locked]).status == 0)
        let r = await store.run(["team", "import", "locked", "--key-file", locked, "--passphrase-file", store.passFile])
        #expect(r.status != 0 && r.err.contains("is encrypted") && r.err.contains("ssh-keygen -p"), "\(r.err)")
        #expect(await store.run(["team", "show", "locked"]).status != 0)
    }

    @Test(.enabled(if: have(openssl))) func pkcs8OfBothAlgorithmsAndRawSeedsImportAndAreNamed() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        for (algorithm, word) in [("ED25519", "a PKCS#8 Ed25519 key"), ("EC -pkeyopt ec_paramgen_curve:P-256", "a PKCS#8 P-256 key")] {
            let path = store.dir.path + "/k-\(word.count).pem"
            let made = ChildProcess.capture("/bin/sh", ["-c", "openssl genpkey -algorithm \(algorithm) -out '\(path)'"])
            #expect(made.status == 0, "\(made.err)")
            let r = await store.run(["team", "import", "k\(word.count)", "--key-file", path, "--passphrase-file", store.passFile])
            #expect(r.status == 0 && r.out.hasPrefix("Imported \(word), as team key k\(word.count).\n"), "\(r.out) \(r.err)")
            // The public key is the file's.
            let pub = ChildProcess.capture(Self.openssl, ["pkey", "-in", path, "-pubout"]).out
            let shown = await store.run(["team", "show", "k\(word.count)"])
            #expect(shown.out.contains(pub.trimmingCharacters(in: .newlines)), "\(shown.out)\n\(pub)")
        }
        let seed = try store.file("seed.bin", [UInt8](repeating: 0xC3, count: 32))
        let r = await store.run(["team", "import", "raw", "--key-file", seed, "--passphrase-file", store.passFile])
        #expect(r.status == 0 && r.out.hasPrefix("Imported a raw 32-byte Ed25519 seed, as team key raw.\n"), "\(r.out) \(r.err)")
    }
}
