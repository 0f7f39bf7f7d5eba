import Foundation
import Synchronization
import SiteKeepCustody
@testable import SiteKeepPartitions

/// Storage keys in memory; destroy removes them. Records calls so tests can check ordering.
final class MemoryKeyProvider: SiteStorageKeyProvider {
    private let keys = Mutex<[String: SymmetricKeyHandle]>([:])
    let events = Mutex<[String]>([])
    /// Called at destroy time (to observe what exists on disk at that moment).
    let onDestroy: (@Sendable (String) -> Void)?

    init(onDestroy: (@Sendable (String) -> Void)? = nil) { self.onDestroy = onDestroy }

    func storageKey(forSite siteID: String, protection: ProtectionClass) throws -> SymmetricKeyHandle {
        try keys.withLock { k in
            if let h = k[siteID] { return h }
            let h = try SymmetricKeyHandle.random()
            k[siteID] = h
            return h
        }
    }

    func destroyStorageKey(forSite siteID: String, protection: ProtectionClass) throws {
        onDestroy?(siteID)
        events.withLock { $0.append("destroy:\(siteID)") }
        keys.withLock { _ = $0.removeValue(forKey: siteID) }
    }

    var keyCount: Int { keys.withLock { $0.count } }
}

/// A fresh temporary directory, removed when the test ends.
final class TempDir: Sendable {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-test-\(UUID().uuidString.lowercased())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
}

func makeRegistry(_ dir: TempDir, keys: MemoryKeyProvider = MemoryKeyProvider(), limits: PartitionLimits = PartitionLimits()) throws -> SiteRegistry {
    try SiteRegistry(home: dir.url.appendingPathComponent("home"), keys: keys, limits: limits)
}

func permissions(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int) ?? -1
}

/// A snapshot of every file under a directory (path → bytes), to prove nothing changed.
func snapshot(_ dir: URL) -> [String: Data] {
    var out: [String: Data] = [:]
    guard let e = FileManager.default.enumerator(atPath: dir.path) else { return out }
    while let rel = e.nextObject() as? String {
        var isDir: ObjCBool = false
        let p = dir.appendingPathComponent(rel).path
        if FileManager.default.fileExists(atPath: p, isDirectory: &isDir), !isDir.boolValue {
            out[rel] = FileManager.default.contents(atPath: p)
        }
    }
    return out
}
