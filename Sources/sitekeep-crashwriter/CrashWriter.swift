// A test helper for the kill -9 test, not a SiteKeep command.
//
//   sitekeep-crashwriter write  <home> <keyfile> <tag>    write rows until killed; print each
//                                                         acknowledged key on its own line
//   sitekeep-crashwriter verify <home> <keyfile> <acks>   reopen, integrity-check, and check
//                                                         that every key listed in <acks> is there
//
// The storage key sits in <keyfile> in clear: acceptable only because this is a throwaway test
// store; nothing else in SiteKeep keeps a key like this.
import Foundation
import Glibc
import SiteKeepHardening
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepPartitions
import SiteKeepVocabulary

/// Reads (or creates) a 32-byte key file; one key for the one site of the test store.
struct FileKeyProvider: SiteStorageKeyProvider {
    let path: String
    func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle {
        if !FileManager.default.fileExists(atPath: path) {
            var bytes = SecureRandom.bytes(count: 32)
            let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw CrashWriterError.message("cannot create the key file") }
            let written = write(fd, &bytes, 32)
            fsync(fd)
            close(fd)
            SecureMemory.zero(&bytes)
            guard written == 32 else { throw CrashWriterError.message("cannot write the key file") }
        }
        guard let data = FileManager.default.contents(atPath: path), data.count == 32 else {
            throw CrashWriterError.message("key file is not 32 bytes")
        }
        return try SymmetricKeyHandle(taking: SecretBytes(copying: data))
    }
    func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws {
        unlink(path)
    }
}

enum CrashWriterError: Error { case message(String) }

/// The one site of the test store (a fixed identifier so restarts find it).
let siteID = SiteID(UUID(uuid: (0, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0xC0, 0xDE)))

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

@main
struct CrashWriter {
    static func main() {
        do { _ = try ProcessHardening.apply() } catch {
            FileHandle.standardError.write(Data("cannot harden the process: \(error)\n".utf8))
            exit(70)
        }
        let args = CommandLine.arguments
        guard args.count == 5, ["write", "verify"].contains(args[1]) else {
            FileHandle.standardError.write(Data("usage: sitekeep-crashwriter write|verify <home> <keyfile> <tag|acks>\n".utf8))
            exit(64)
        }
        do {
            let registry = try SiteRegistry(home: URL(fileURLWithPath: args[2]), keys: FileKeyProvider(path: args[3]))
            if registry.site(forIdentifier: siteID) == nil {
                _ = try registry.add(displayName: "crash", origins: ["https://crash.example"], appBound: true, protection: .afterLogin, identifier: siteID)
            }
            let partition = try registry.openPartition(forIdentifier: siteID)
            if args[1] == "write" {
                let tag = args[4]
                var i = 0
                while true {
                    if i % 10 == 9 {
                        // Every tenth acknowledgement is a batch of three rows.
                        let keys = (0..<3).map { "\(tag)-\(i)-\($0)" }
                        try partition.storage.setItems(keys.map { ($0, "value-\($0)") })
                        for k in keys { say(k) }
                    } else {
                        let k = "\(tag)-\(i)"
                        try partition.storage.setItem(k, "value-\(k)")
                        say(k)
                    }
                    i += 1
                }
            } else {
                try partition.verify()
                let acks = (try String(contentsOfFile: args[4], encoding: .utf8)).split(separator: "\n").map(String.init)
                var missing = 0
                for k in acks where try partition.storage.getItem(k) != "value-\(k)" {
                    say("MISSING \(k)")
                    missing += 1
                }
                say(missing == 0 ? "OK \(acks.count)" : "FAILED \(missing) of \(acks.count)")
                partition.close()
                exit(missing == 0 ? 0 : 1)
            }
        } catch {
            say("ERROR \(error)")
            exit(1)
        }
    }
}
