import Foundation
import Testing
@testable import SiteKeepVault

/// The MIME types new tree entries record match Python's `mimetypes.guess_type` (what sgit
/// records) on this machine, so trees SiteKeep writes stay byte-identical to sgit's.
@Suite("MIME types as sgit records them", .enabled(if: Interop.enabled, "SITEKEEP_SKIP_INTEROP=1"))
struct MimeTypeTests {
    static let names = ["a.txt", "b.md", "c.json", "d.py", "e.ts", "f.rs", "g.swift", "h.yaml", "i.TXT", "j.tar.gz", "k.svgz",
                        ".bashrc", "noext", "x.PNG", "y.tgz", "z.html", "w.Z", "v.csv.bz2", "..", "u.", "t.webmanifest", "s.jpeg"]

    @Test func guessesMatchPythonOnThisMachine() throws {
        let python = URL(fileURLWithPath: try Interop.sgitPath()).deletingLastPathComponent().appendingPathComponent("python").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = ["-c", "import mimetypes,sys\nfor n in sys.argv[1:]: print(mimetypes.guess_type(n)[0] or 'application/octet-stream')"] + Self.names
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        let expected = text.split(separator: "\n").map(String.init)
        #expect(expected.count == Self.names.count)
        for (name, want) in zip(Self.names, expected) {
            #expect(MimeTypes.guess(fileName: name) == want, "\(name)")
        }
    }
}

/// File ids that arrive from a remote can only name `bare/` files of the known kinds (§7).
@Suite struct FileIDTests {
    @Test func onlyBareFilesOfKnownKindsAreAccepted() {
        #expect(FileIDs.validate("bare/data/obj-cas-imm-9f5613e8b39d") == "bare/data/obj-cas-imm-9f5613e8b39d")
        #expect(FileIDs.validate("bare/data/OBJ-CAS-IMM-9F5613E8B39D") == "bare/data/obj-cas-imm-9f5613e8b39d")
        #expect(FileIDs.validate("bare/refs/ref-pid-muw-4a6c6b871295") != nil)
        #expect(FileIDs.validate("bare/indexes/idx-pid-muw-5062d251eb63") != nil)
        #expect(FileIDs.validate("bare/keys/key-rnd-imm-1a064d7bd08a7250") != nil)
        #expect(FileIDs.validate("bare/cache/value/cch-pid-snw-b59b47b4e20b") != nil)
        for bad in ["local/vault_key", "bare/../local/vault_key", "bare/data/../../x", "bare/data/obj-cas-imm-9f56", "bare/refs/x",
                    "/bare/data/obj-cas-imm-9f5613e8b39d", "bare/data/obj-cas-imm-9f5613e8b39d/x", "bare/pending/.hidden", "bare/keys/key-rnd-imm-zz",
                    "bare/cache/other/cch-pid-snw-b59b47b4e20b", "bare"] {
            #expect(FileIDs.validate(bad) == nil, "\(bad)")
        }
    }
}
