public import Foundation
import Glibc
import Synchronization
import SiteKeepJSON
public import SiteKeepSystem

/// Why a page could not be kept.
public enum KeptPageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The page alone is larger than the whole budget.
    case tooLarge(bytes: Int, budget: Int64)
    /// The page would fit only by dropping kept pages, and the caller asked not to (a prefetch
    /// never pushes out what the reader opened).
    case full(bytes: Int, used: Int64, budget: Int64)
    /// A file of the cache could not be written.
    case storage(String)

    public var description: String {
        switch self {
        case .tooLarge(let bytes, let budget): "the page is \(bytes) bytes, more than the kept-page budget of \(budget) bytes"
        case .full(let bytes, let used, let budget): "the kept-page budget is reached: \(used) of \(budget) bytes used, and the page needs \(bytes) more; raise --kept-budget to keep more"
        case .storage(let what): "the kept-page cache cannot be written: \(what)"
        }
    }
}

/// A kept copy of a page: the document with its figures, styles and scripts inlined, ready to be
/// shown at its real URL (so it keeps its own origin, storage and bridge).
public struct KeptPage: Sendable, Equatable {
    public var url: String
    public var title: String?
    public var document: [UInt8]
    public var keptAt: Date
}

/// Every article a site's views open is kept here, in the site's own web folder, so it can be
/// shown offline. Content-addressed: a document is stored once under the SHA-256 of its bytes
/// (`objects/<2 hex>/<64 hex>`), and each URL has a small manifest naming its object
/// (`pages/<SHA-256 of the URL>.json`). A part the document inlines that is big enough to be
/// worth sharing (a figure's `data:` URI, a style sheet's text: the masthead and the style every
/// page of a site shows) is stored once as an object of its own, its place in the document
/// holding ``partMarker`` and its name, so it is kept and counted against the budget once per
/// site however many pages show it, and put back in place when the page is shown. A copy
/// whose bytes (or a part's) no longer match its name is treated as absent and removed. The
/// cache keeps within a size budget by dropping the least recently used pages first. Files are
/// 0600 in 0700 folders and replaced atomically.
public final class KeptPageCache: Sendable {
    /// The cache's folder.
    public let folder: String
    /// The most bytes the kept documents may use together.
    public let budget: Int64
    private let digest: @Sendable ([UInt8]) -> String
    private let lock = Mutex(())

    /// - Parameters:
    ///   - digest: SHA-256 of the bytes as 64 lower-case hex digits (the browser passes GLib's;
    ///     the core links no crypto library).
    public init(folder: String, budget: Int64, digest: @escaping @Sendable ([UInt8]) -> String) {
        self.folder = folder
        self.budget = budget
        self.digest = digest
    }

    /// The URL a page is kept under: the fragment is not part of the page.
    public static func key(for url: String) -> String {
        if let hash = url.firstIndex(of: "#") { return String(url[..<hash]) }
        return url
    }

    /// What stands in a stored document for a shared part, followed by the part's object name.
    public static let partMarker = "sitekeep-kept-part:"
    /// The smallest inlined part stored on its own (smaller ones stay in the document).
    public static let partThreshold = 2048

    /// `document` with each inlined part of ``partThreshold`` bytes or more (the value of a
    /// double-quoted attribute that starts `data:`, the text of a `<style>` element) replaced by
    /// ``partMarker`` and its name; and the parts, by name. The replacement is undone byte for
    /// byte by ``join(_:parts:)``, whatever the ranges hold, so the reading need not be a parser's.
    /// A document that already contains the marker is left whole (nothing in it can name a part).
    func split(_ document: [UInt8]) -> (document: [UInt8], parts: [String: [UInt8]]) {
        let marker = Array(Self.partMarker.utf8)
        guard Self.find(marker, in: document, from: 0) == nil else { return (document, [:]) }
        var out: [UInt8] = []
        out.reserveCapacity(document.count)
        var parts: [String: [UInt8]] = [:]
        var at = 0
        let dataOpen = Array("\"data:".utf8), styleOpen = Array("<style".utf8), styleClose = Array("</style>".utf8)
        while at < document.count {
            let d = Self.find(dataOpen, in: document, from: at)
            let st = Self.find(styleOpen, in: document, from: at)
            guard d != nil || st != nil else { break }
            var range: Range<Int>?
            var next: Int
            if let d, st.map({ d < $0 }) ?? true {
                let start = d + 1
                let end = document[start...].firstIndex(of: UInt8(ascii: "\"")) ?? document.count
                range = start..<end
                next = end
            } else {
                let s0 = st!
                guard let gt = document[s0...].firstIndex(of: UInt8(ascii: ">")) else { break }
                let end = Self.find(styleClose, in: document, from: gt + 1) ?? document.count
                range = (gt + 1)..<end
                next = end
            }
            if let r = range, r.count >= Self.partThreshold {
                let bytes = Array(document[r])
                let name = digest(bytes)
                parts[name] = bytes
                out += document[at..<r.lowerBound]
                out += marker + Array(name.utf8)
                at = r.upperBound
            } else {
                out += document[at..<next]
                at = next
            }
            if next >= document.count { break }
        }
        if at < document.count { out += document[at...] }
        return (out, parts)
    }

    /// The document `split(_:)` made, with each marked part put back; nil when one is not in `parts`.
    static func join(_ document: [UInt8], parts: [String: [UInt8]]) -> [UInt8]? {
        let marker = Array(partMarker.utf8)
        var out: [UInt8] = []
        var at = 0
        while let m = find(marker, in: document, from: at) {
            let nameStart = m + marker.count
            guard nameStart + 64 <= document.count, let part = parts[String(decoding: document[nameStart..<(nameStart + 64)], as: UTF8.self)] else { return nil }
            out += document[at..<m]
            out += part
            at = nameStart + 64
        }
        out += document[at...]
        return out
    }

    /// The first index of `needle` in `haystack` at or after `from`.
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard let first = needle.first, haystack.count >= needle.count else { return nil }
        var i = from
        let last = haystack.count - needle.count
        while i <= last {
            guard let j = haystack[i...last].firstIndex(of: first) else { return nil }
            if haystack[j..<(j + needle.count)].elementsEqual(needle) { return j }
            i = j + 1
        }
        return nil
    }

    private func manifestPath(_ url: String) -> String { folder + "/pages/" + digest(Array(Self.key(for: url).utf8)) + ".json" }
    private func objectPath(_ name: String) -> String { folder + "/objects/" + name.prefix(2) + "/" + name }

    /// Keeps `document` for `url`, then drops least recently used pages beyond the budget.
    /// - Parameter makeRoom: false to refuse (``KeptPageError/full(bytes:used:budget:)``) a page
    ///   that fits only by dropping others, instead of dropping them (a prefetch).
    public func keep(url: String, title: String?, document: [UInt8], now: Date = Date(timeIntervalSince1970: Clocks.wallSeconds()), makeRoom: Bool = true) throws(KeptPageError) {
        guard Int64(document.count) <= budget else { throw .tooLarge(bytes: document.count, budget: budget) }
        let (stored, parts) = split(document)
        try lock.withLock { _ throws(KeptPageError) in
            let name = digest(stored)
            guard ([name] + parts.keys).allSatisfy({ $0.count == 64 && $0.allSatisfy { $0.isHexDigit && !$0.isUppercase } }) else {
                throw .storage("the digest function did not return 64 hex digits")
            }
            let objects = [(name, stored)] + parts.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            if !makeRoom {
                let others = entries().filter { KeptPageCache.key(for: $0.url) != Self.key(for: url) }
                let used = Self.total(others)
                var seen = Set(others.flatMap { $0.objects.map(\.name) })
                let adds = objects.reduce(Int64(0)) { seen.insert($1.0).inserted ? $0 + Int64($1.1.count) : $0 }
                if used + adds > budget { throw .full(bytes: Int(adds), used: used, budget: budget) }
            }
            for (object, bytes) in objects where !FileManager.default.fileExists(atPath: objectPath(object)) {
                try Self.makeFolder(folder + "/objects/" + object.prefix(2))
                try Self.writeAtomically(objectPath(object), bytes)
            }
            var manifest: JSONValue = [
                "v": 1, "url": .string(Self.key(for: url)), "title": title.map { .string($0) } ?? .null,
                "object": .string(name), "bytes": .int(Int64(stored.count)),
                "keptAt": .double(now.timeIntervalSince1970), "usedAt": .double(now.timeIntervalSince1970),
            ]
            if !parts.isEmpty, case .object(var members) = manifest {
                members.append(JSONMember(key: "parts", value: .array(parts.sorted { $0.key < $1.key }.map { ["object": .string($0.key), "bytes": .int(Int64($0.value.count))] })))
                manifest = .object(members)
            }
            try Self.makeFolder(folder + "/pages")
            try Self.writeAtomically(manifestPath(url), Array(JSONSerializer.string(manifest, style: .compact).utf8))
            try enforceBudgetLocked()
        }
    }

    /// The kept copy of `url`, or nil when there is none or it is damaged (then it is removed).
    public func page(for url: String, now: Date = Date(timeIntervalSince1970: Clocks.wallSeconds())) -> KeptPage? {
        lock.withLock { _ -> KeptPage? in
            guard let entry = readManifest(manifestPath(url)), entry.url == Self.key(for: url) else { return nil }
            var read: [String: [UInt8]] = [:]
            for (object, _) in entry.objects {
                guard case .bytes(let bytes)? = try? FileIO.readRegularFile(objectPath(object), limit: Int(clamping: budget)),
                      digest(bytes) == object else {
                    // Damaged: the page is gone, and the object (a part other pages name is
                    // gone for them too: each of those finds it missing and is dropped the same way).
                    unlink(manifestPath(url))
                    unlink(objectPath(object))
                    return nil
                }
                read[object] = bytes
            }
            // A document with no parts was stored whole (one that held the marker text is never split).
            guard let stored = read[entry.object], let bytes = entry.objects.count == 1 ? stored : Self.join(stored, parts: read) else {
                unlink(manifestPath(url))
                return nil
            }
            var used = entry.json
            if case .object(var members) = used {
                members.removeAll { $0.key == "usedAt" }
                members.append(JSONMember(key: "usedAt", value: .double(now.timeIntervalSince1970)))
                used = .object(members)
                try? Self.writeAtomically(manifestPath(url), Array(JSONSerializer.string(used, style: .compact).utf8))
            }
            return KeptPage(url: entry.url, title: entry.title, document: bytes, keptAt: Date(timeIntervalSince1970: entry.keptAt))
        }
    }

    /// Whether a copy of `url` is kept (without checking its bytes).
    public func contains(url: String) -> Bool {
        lock.withLock { _ in readManifest(manifestPath(url)).map { FileManager.default.fileExists(atPath: objectPath($0.object)) } ?? false }
    }

    /// A kept page as ``keptPages()`` lists it: its URL (in ``key(for:)`` form), title and
    /// times, without its document.
    public struct Listing: Sendable, Equatable {
        public var url: String
        public var title: String?
        public var keptAt: Date
        public var usedAt: Date
    }

    /// Every page kept here whose document file is present, in no particular order. Reads the
    /// small manifests only (the documents' bytes are checked when a page is shown, by
    /// ``page(for:now:)``), and changes nothing: listing a page does not count as using it.
    public func keptPages() -> [Listing] {
        lock.withLock { _ in
            entries().filter { FileManager.default.fileExists(atPath: objectPath($0.object)) }.map {
                Listing(url: $0.url, title: $0.title, keptAt: Date(timeIntervalSince1970: $0.keptAt),
                        usedAt: Date(timeIntervalSince1970: $0.usedAt))
            }
        }
    }

    /// Bytes the kept documents and their shared parts use (each object counted once).
    public func usage() -> Int64 {
        lock.withLock { _ in usageLocked() }
    }

    private struct Entry {
        var path: String
        var url: String
        var title: String?
        var object: String
        var bytes: Int64
        /// The document's object, then each shared part's: (name, bytes).
        var objects: [(name: String, bytes: Int64)]
        var keptAt: Double
        var usedAt: Double
        var json: JSONValue
    }

    private func readManifest(_ path: String) -> Entry? {
        guard case .bytes(let data)? = try? FileIO.readRegularFile(path, limit: 1 << 20),
              let v = try? JSONParser.parse(data, limits: .document),
              v["v"]?.intValue == 1, let url = v["url"]?.stringValue, let object = v["object"]?.stringValue,
              object.count == 64, object.allSatisfy({ $0.isHexDigit }), let bytes = v["bytes"]?.intValue else { return nil }
        var objects: [(name: String, bytes: Int64)] = [(object, bytes)]
        for part in v["parts"]?.arrayValue ?? [] {
            guard let name = part["object"]?.stringValue, name.count == 64, name.allSatisfy({ $0.isHexDigit }),
                  let n = part["bytes"]?.intValue else { return nil }
            objects.append((name, n))
        }
        return Entry(path: path, url: url, title: v["title"]?.stringValue, object: object, bytes: bytes, objects: objects,
                     keptAt: v["keptAt"]?.doubleValue ?? 0, usedAt: v["usedAt"]?.doubleValue ?? 0, json: v)
    }

    private func entries() -> [Entry] {
        let dir = folder + "/pages"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return names.filter { $0.hasSuffix(".json") }.compactMap { readManifest(dir + "/" + $0) }
    }

    private func usageLocked() -> Int64 { Self.total(entries()) }

    /// The bytes of the objects `list` names, each counted once (a shared part once for all).
    private static func total(_ list: [Entry]) -> Int64 {
        var seen = Set<String>()
        var total: Int64 = 0
        for e in list {
            for o in e.objects where seen.insert(o.name).inserted { total += o.bytes }
        }
        return total
    }

    /// Drops least recently used pages until the budget holds, then objects no page names.
    private func enforceBudgetLocked() throws(KeptPageError) {
        var list = entries().sorted { $0.usedAt < $1.usedAt }
        while Self.total(list) > budget, !list.isEmpty {
            unlink(list.removeFirst().path)
        }
        let live = Set(list.flatMap { $0.objects.map(\.name) })
        let objects = folder + "/objects"
        for sub in (try? FileManager.default.contentsOfDirectory(atPath: objects)) ?? [] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: objects + "/" + sub)) ?? [] where !live.contains(name) {
                unlink(objects + "/" + sub + "/" + name)
            }
        }
    }

    static func makeFolder(_ path: String) throws(KeptPageError) {
        var parts: [String] = []
        var p = path
        while !p.isEmpty, p != "/", !FileManager.default.fileExists(atPath: p) {
            parts.append(p)
            p = (p as NSString).deletingLastPathComponent
        }
        for dir in parts.reversed() {
            do { try PrivateFolder.make(dir) } catch { throw .storage("\(error)") }
        }
    }

    /// Replaces `path` with `bytes` (0600) through ``AtomicFile/replace(_:with:mode:temporaryFolder:syncFolder:)``
    /// (O_EXCL temp file beside it, fsync, rename, fsync of the folder): a reader sees the old
    /// file or the new one, never a part.
    static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws(KeptPageError) {
        do { try AtomicFile.replace(path, with: bytes) } catch { throw .storage("\(error)") }
    }
}
