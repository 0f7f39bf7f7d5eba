import Foundation
import SiteKeepKeyring
import SiteKeepSystem
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite struct FileKeyringTests {
    private func mode(_ path: String) -> mode_t {
        var info = stat()
        _ = stat(path, &info)
        return info.st_mode & 0o7777
    }

    private func item(_ id: String) -> KeyringItemID { KeyringItemID(store: "s", kind: "slot", id: id) }

    @Test func createsFolder0700AndFile0600() throws {
        let temp = try TemporaryFolder()
        let folder = temp.path + "/a/b/sitekeep"
        let keyring = try FileKeyring(folder: folder)
        #expect(mode(folder) == 0o700)
        #expect(!FileManager.default.fileExists(atPath: keyring.path), "created only by the first store")
        try keyring.store([1], for: item("x"), label: "l")
        #expect(mode(keyring.path) == 0o600)
        #expect(keyring.location.contains(keyring.path))
    }

    @Test func refusesAFolderOthersCanRead() throws {
        let temp = try TemporaryFolder()
        let folder = temp.path + "/home"
        _ = try FileKeyring(folder: folder)
        chmod(folder, 0o755)
        do {
            _ = try FileKeyring(folder: folder)
            Issue.record("an 0755 folder was accepted")
        } catch {
            guard case .insecurePermissions(let why) = error else { Issue.record("wrong error \(error)"); return }
            #expect(why.contains("chmod 700 '\(folder)'"))
            #expect(why.contains("0755"))
        }
    }

    @Test func refusesAFileOthersCanRead() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path)
        try keyring.store([1], for: item("x"), label: "l")
        chmod(keyring.path, 0o640)
        do {
            _ = try keyring.load(item("x"))
            Issue.record("an 0640 file was read")
        } catch {
            guard case .insecurePermissions(let why) = error else { Issue.record("wrong error \(error)"); return }
            #expect(why.contains("chmod 600 '\(keyring.path)'"))
        }
        #expect(throws: KeyringError.self) { try keyring.store([2], for: item("y"), label: "l") }
        chmod(keyring.path, 0o600)
        #expect(try keyring.load(item("x")) == [1])
    }

    @Test func refusesASymbolicLink() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path + "/home")
        try keyring.store([1], for: item("x"), label: "l")
        try FileManager.default.moveItem(atPath: keyring.path, toPath: temp.path + "/elsewhere")
        symlink(temp.path + "/elsewhere", keyring.path)
        #expect {
            try keyring.load(item("x"))
        } throws: { error in
            guard case .insecurePermissions = error as? KeyringError else { return false }
            return true
        }
    }

    private func expectCorrupt(_ keyring: FileKeyring, _ comment: Comment) {
        do {
            _ = try keyring.load(item("x"))
            Issue.record("a damaged file was read: \(comment)")
        } catch {
            guard case .corrupt = error else { Issue.record("wrong error \(error): \(comment)"); return }
        }
    }

    @Test func detectsAFlippedByteAnywhere() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path)
        try keyring.store([1, 2, 3, 4], for: item("x"), label: "label")
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: keyring.path)))
        // Every position, one bit each: the header, the digest and the body.
        for index in original.indices {
            var damaged = original
            damaged[index] ^= 0x01
            try Data(damaged).write(to: URL(fileURLWithPath: keyring.path))
            chmod(keyring.path, 0o600)
            expectCorrupt(keyring, "byte \(index) flipped")
        }
        try Data(original).write(to: URL(fileURLWithPath: keyring.path))
        #expect(try keyring.load(item("x")) == [1, 2, 3, 4])
    }

    /// One keyring reads its file on every lookup and only skips decoding bytes it has already
    /// decoded: a change in place after a lookup, and a write by another instance, are both seen.
    @Test func everyLookupSeesTheFileAsItIsNow() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path)
        try keyring.store([1, 2, 3, 4], for: item("x"), label: "label")
        #expect(try keyring.load(item("x")) == [1, 2, 3, 4])
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: keyring.path)))
        var damaged = original
        damaged[damaged.count - 5] ^= 0x01   // same size, same inode, written within the same tick
        try Data(damaged).write(to: URL(fileURLWithPath: keyring.path))
        expectCorrupt(keyring, "changed in place right after a lookup")
        try Data(original).write(to: URL(fileURLWithPath: keyring.path))
        #expect(try keyring.load(item("x")) == [1, 2, 3, 4])
        let other = try FileKeyring(folder: temp.path)
        try other.store([9], for: item("x"), label: "label")
        try other.store([5], for: item("y"), label: "label")
        #expect(try keyring.load(item("x")) == [9])
        #expect(try keyring.list(store: "s", kind: nil).map(\.id) == ["x", "y"])
    }

    @Test func detectsTruncationAndExtension() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path)
        try keyring.store(Array(repeating: 7, count: 100), for: item("x"), label: "label")
        let original = try Array(Data(contentsOf: URL(fileURLWithPath: keyring.path)))
        for length in [1, 20, original.count / 2, original.count - 1] {
            try Data(original.prefix(length)).write(to: URL(fileURLWithPath: keyring.path))
            expectCorrupt(keyring, "truncated to \(length)")
        }
        try Data(original + [0x20]).write(to: URL(fileURLWithPath: keyring.path))
        expectCorrupt(keyring, "one byte appended")
        try Data().write(to: URL(fileURLWithPath: keyring.path))
        expectCorrupt(keyring, "empty file")
        // A store over a damaged file refuses rather than overwriting what it cannot read.
        #expect(throws: KeyringError.self) { try keyring.store([1], for: item("y"), label: "l") }
    }

    @Test func refusesAnotherFormatVersion() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path)
        try keyring.store([1], for: item("x"), label: "l")
        var text = try String(contentsOfFile: keyring.path, encoding: .utf8)
        text = text.replacingOccurrences(of: "sitekeep-keyring 1\n", with: "sitekeep-keyring 2\n")
        try text.write(toFile: keyring.path, atomically: false, encoding: .utf8)
        do {
            _ = try keyring.load(item("x"))
            Issue.record("version 2 was read")
        } catch {
            guard case .corrupt(let why) = error else { Issue.record("wrong error \(error)"); return }
            #expect(why.contains("version '2'"))
        }
    }

    @Test func replacesAtomicallyLeavingNoTemporaryFiles() throws {
        let temp = try TemporaryFolder()
        let keyring = try FileKeyring(folder: temp.path)
        for round in 0..<20 {
            try keyring.store([UInt8(round)], for: item("x"), label: "l")
            try keyring.store([UInt8(round), 1], for: item("y\(round)"), label: "l")
        }
        try keyring.delete(item("y3"))
        let names = try FileManager.default.contentsOfDirectory(atPath: temp.path).sorted()
        #expect(names == [FileKeyring.fileName, FileKeyring.fileName + ".lock"])
        #expect(try keyring.load(item("x")) == [19])
        #expect(try keyring.list(store: "s", kind: "slot").count == 20)
        // The bytes on disk hold no blob in the clear... they hold only what was given (already
        // ciphertext), base64-encoded; a reopened keyring reads the same items.
        let reopened = try FileKeyring(folder: temp.path)
        #expect(try reopened.load(item("y7")) == [7, 1])
    }

    @Test func concurrentWritersLoseNothing() async throws {
        let temp = try TemporaryFolder()
        let folder = temp.path
        // Separate instances share no mutex, so only the cross-process flock keeps them apart;
        // the shared instance exercises the in-process mutex.
        let shared = try FileKeyring(folder: folder)
        await withTaskGroup(of: Void.self) { group in
            for writer in 0..<4 {
                group.addTask {
                    let keyring = writer < 2 ? shared : (try? FileKeyring(folder: folder))
                    for n in 0..<25 {
                        try? keyring?.store([UInt8(writer), UInt8(n)], for: KeyringItemID(store: "s", kind: "w\(writer)", id: "\(n)"), label: "l")
                    }
                }
            }
        }
        for writer in 0..<4 {
            let items = try shared.list(store: "s", kind: "w\(writer)")
            #expect(items.count == 25, "writer \(writer)")
            for n in 0..<25 {
                #expect(try shared.load(KeyringItemID(store: "s", kind: "w\(writer)", id: "\(n)")) == [UInt8(writer), UInt8(n)])
            }
        }
    }

    @Test func homeResolution() throws {
        #expect(try StoreHome.resolve(environment: ["SITEKEEP_HOME": "/x/y/", "XDG_DATA_HOME": "/d", "HOME": "/h"]).path == "/x/y")
        #expect(try StoreHome.resolve(environment: ["XDG_DATA_HOME": "/d", "HOME": "/h"]) .path == "/d/sitekeep")
        #expect(try StoreHome.resolve(environment: ["XDG_DATA_HOME": "relative", "HOME": "/h"]).path == "/h/.local/share/sitekeep")
        #expect(try StoreHome.resolve(environment: ["HOME": "/h"]).source == .home)
        #expect(throws: StoreHomeError.self) { try StoreHome.resolve(environment: [:]) }
        #expect(throws: StoreHomeError.self) { try StoreHome.resolve(environment: ["SITEKEEP_HOME": "rel"]) }
    }

    /// The one rule the CLI uses too (issue 13, item 6): `--home` beats the environment, a
    /// relative `--home` or SITEKEEP_HOME is relative to the working folder, a relative HOME is
    /// ignored, and an empty or NUL-holding `--home` is refused by name.
    @Test func homeResolutionWithAnExplicitHomeAndAWorkingFolder() throws {
        let env = ["SITEKEEP_HOME": "/x/y", "XDG_DATA_HOME": "/d", "HOME": "/h"]
        #expect(try StoreHome.resolve(explicit: "/e//", environment: env, workingDirectory: "/w").path == "/e")
        #expect(try StoreHome.resolve(explicit: "/e", environment: env).source == .explicit)
        #expect(try StoreHome.resolve(explicit: "rel/s", environment: env, workingDirectory: "/w/").path == "/w/rel/s")
        #expect(try StoreHome.resolve(environment: ["SITEKEEP_HOME": "rel"], workingDirectory: "/w").path == "/w/rel")
        #expect(try StoreHome.resolve(environment: ["SITEKEEP_HOME": "", "HOME": "/h"]).path == "/h/.local/share/sitekeep")
        #expect(throws: StoreHomeError.self) { try StoreHome.resolve(environment: ["HOME": "relative"], workingDirectory: "/w") }
        #expect(throws: StoreHomeError("--home must be a folder path")) { try StoreHome.resolve(explicit: "", environment: env) }
        #expect(throws: StoreHomeError("--home must be a folder path")) { try StoreHome.resolve(explicit: "a\0b", environment: env) }
        #expect(throws: StoreHomeError("--home must be an absolute path, not 'rel'")) { try StoreHome.resolve(explicit: "rel", environment: env) }
    }

    @Test func openFileAndAutoKeepsAnExistingFileKeyring() throws {
        let temp = try TemporaryFolder()
        let home = StoreHome(path: temp.path + "/home")
        let chosen = try Keyring.open(choice: .file, home: home)
        #expect(chosen.backend.kind == .file)
        #expect(chosen.reason.contains("--keyring file"))
        try chosen.backend.store([5], for: item("x"), label: "l")
        let auto = try Keyring.open(choice: .auto, home: home)
        #expect(auto.backend.kind == .file)
        #expect(auto.reason.contains("existing file keyring"))
        #expect(try auto.backend.load(item("x")) == [5])
    }
}
