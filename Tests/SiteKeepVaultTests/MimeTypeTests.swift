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
