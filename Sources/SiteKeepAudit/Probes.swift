import Foundation
import SiteKeepPartitions
import SiteKeepCore
import SiteKeepWiring
import SiteKeepVocabulary
import SiteKeepSystem

/// Every read path of the subject's own partition, asked for every other site's names: none
/// may return another site's canary.
struct ForeignAPIPathsProbe: Probe {
    let name = "foreign-api-paths"
    let summary = "every partition read path, asked for other sites' keys, articles and URLs, returns only the subject's own data"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        try context.withPartition(subject) { p in
            var seen: [String] = []
            for other in context.others(than: subject) {
                let c = other.canaries
                seen.append(try p.storage.getItem(c.ownKey) ?? "")
                seen.append(try p.storage.getItem(c.ownValue) ?? "")
                if try p.reading.state(for: c.article) != .unread { return .leak("reading state of \(other.id)'s article visible") }
                if let r = try p.cache.resource(for: c.cacheURL) { seen.append(String(decoding: r.body, as: UTF8.self)) }
            }
            seen += try p.storage.keys()
            for k in try p.storage.keys() { seen.append(try p.storage.getItem(k) ?? "") }
            seen.append(try p.storage.getItem(AuditContext.sharedKey) ?? "")
            if let s = try p.tabs.session() { seen += s.tabs.flatMap { [$0.title, $0.url, $0.id] } }
            seen += try p.reading.all().keys
            seen += try p.cache.urls()
            for u in try p.cache.urls() {
                if let r = try p.cache.resource(for: u) {
                    seen.append(String(decoding: r.body, as: UTF8.self))
                    seen += r.headers.map(\.value)
                }
            }
            for text in seen {
                if let c = context.foreignCanary(in: text, subject: subject) { return .leak("read another site's canary \(c)") }
            }
            // Its own data must still be there (a probe that reads nothing proves nothing).
            guard try p.storage.getItem(AuditContext.sharedKey) == subject.canaries.sharedValue,
                  try p.storage.getItem(subject.canaries.ownKey) == subject.canaries.ownValue,
                  try p.tabs.session()?.tabs.first?.title == subject.canaries.tabTitle,
                  try p.reading.state(for: subject.canaries.article) == .partRead(progress: 0.5),
                  try p.cache.resource(for: subject.canaries.cacheURL)?.body == Array(subject.canaries.cacheBody.utf8)
            else { return .error("the subject's own canaries are not readable") }
            return .pass
        }
    }
}

/// Registry paths with identifiers of no site.
struct UnknownSiteProbe: Probe {
    let name = "unknown-site"
    let summary = "opening, removing or rebuilding an identifier no site has is refused"

    struct NoSource: PartitionRebuildSource {
        func contents(forSite site: SiteID) throws -> PartitionContents { PartitionContents() }
    }

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        // An identifier one character away from the subject's.
        var text = Array(subject.id.string)
        text[0] = text[0] == "0" ? "1" : "0"
        let near = try SiteID(parsing: String(text))
        for id in [near, SiteID.random()] {
            do { _ = try context.registry.openPartition(forIdentifier: id); return .leak("opened a partition for unknown site \(id)") }
            catch PartitionError.unknownSite { } catch { return .error("open: \(error)") }
            do { try context.registry.remove(forIdentifier: id); return .leak("removed unknown site \(id)") }
            catch PartitionError.unknownSite { } catch { return .error("remove: \(error)") }
            do { try context.registry.rebuildPartition(forIdentifier: id, from: NoSource()); return .leak("rebuilt unknown site \(id)") }
            catch PartitionError.unknownSite { } catch { return .error("rebuild: \(error)") }
            if context.registry.site(forIdentifier: id) != nil { return .leak("unknown identifier \(id) resolved") }
        }
        return .pass
    }
}

/// Look-alikes of the subject's origin: those that canonicalise to it must resolve to it, all
/// others must resolve to no site.
struct OriginLookalikeProbe: Probe {
    let name = "origin-lookalikes"
    let summary = "case, trailing dot, default port, other port, scheme change, userinfo, prefix/suffix tricks, homographs, percent-encoding, whitespace/NUL, IP forms"

    func variants(of o: Origin) -> (same: [String], none: [String]) {
        let s = o.scheme.rawValue
        let isIP = o.host.first?.isNumber == true || o.host.contains(":")
        let h = o.host.contains(":") ? "[\(o.host)]" : o.host
        let explicit = "\(s)://\(h):\(o.port)"
        let implicitPort = o.port == o.scheme.defaultPort ? "" : ":\(o.port)"
        var same = [
            "\(s.uppercased())://\(h.uppercased())\(implicitPort)",
            explicit,
            "\(s)://\(h)\(implicitPort)/",
        ]
        if !isIP {
            same.append("\(s)://\(h).\(implicitPort)")
            same.append("\(s)://\(h.replacingOccurrences(of: ".", with: "\u{3002}"))\(implicitPort)")
        }
        let otherPort = o.port == 65535 ? 65534 : o.port + 1
        let otherScheme = s == "https" ? "http" : "https"
        var none = [
            "\(s)://\(h):\(otherPort)",
            "\(otherScheme)://\(h)\(implicitPort)",
            "\(otherScheme)://\(h):\(o.port)",
            "\(s)://user@\(h)\(implicitPort)",
            "\(s)://user:pass@\(h)\(implicitPort)",
            "\(s)://\(h)\(implicitPort)@evil.example",
            "\(s)://evil.example@\(h)\(implicitPort)",
            "\(s)://\(h)\(implicitPort)/path",
            "\(s)://\(h)\(implicitPort)?q=1",
            "\(s)://\(h)\(implicitPort)#f",
            " \(explicit)", "\(explicit) ", "\(s)://\(h) \(implicitPort)", "\(explicit)\u{0}", "\(s)://\(h)\u{0}.evil.example",
            "\(s)://\(h)\t\(implicitPort)", "\(explicit)\n",
            "\(s):\\\\\(h)\(implicitPort)",
            "null", "file://\(h)/", "blob:\(explicit)/x", "data:text/plain,\(h)", "javascript:\(h)",
        ]
        if !isIP {
            none += [
                "\(s)://\(h).example.com\(implicitPort)",
                "\(s)://example.com.\(h)\(implicitPort)",
                "\(s)://www.\(h)\(implicitPort)",
                "\(s)://x\(h)\(implicitPort)",
                "\(s)://\(h)x\(implicitPort)",
                "\(s)://%\(String(format: "%02X", h.utf8.first ?? 0x61))\(h.dropFirst())\(implicitPort)",
            ]
            if h.contains(".") {
                none += ["\(s)://\(h.replacingOccurrences(of: ".", with: "-"))\(implicitPort)",
                         "\(s)://\(h.replacingOccurrences(of: ".", with: "%2E"))\(implicitPort)"]
            }
            // Homographs: one Latin letter replaced by its Cyrillic twin, in Unicode and in Punycode.
            let twins: [Character: Character] = ["a": "\u{0430}", "e": "\u{0435}", "o": "\u{043E}", "p": "\u{0440}", "c": "\u{0441}", "s": "\u{0455}", "i": "\u{0456}"]
            var labels = h.split(separator: ".").map(String.init)
            if let li = labels.indices.first(where: { labels[$0].contains(where: { twins[$0] != nil }) }),
               let ci = labels[li].firstIndex(where: { twins[$0] != nil }) {
                var label = labels[li]
                label.replaceSubrange(ci...ci, with: String(twins[label[ci]]!))
                labels[li] = label
                none.append("\(s)://\(labels.joined(separator: "."))\(implicitPort)")
                if let puny = Punycode.encode(Array(label.unicodeScalars)) {
                    labels[li] = "xn--" + puny
                    none.append("\(s)://\(labels.joined(separator: "."))\(implicitPort)")
                }
            }
        } else if o.host.hasPrefix("127.") {
            let parts = o.host.split(separator: ".").compactMap { UInt32($0) }
            let n = parts.reduce(UInt32(0)) { $0 << 8 | $1 }
            none += [
                "\(s)://\(n)\(implicitPort)",
                "\(s)://0x\(String(n, radix: 16))\(implicitPort)",
                "\(s)://0x7f.\(parts[1]).\(parts[2]).\(parts[3])\(implicitPort)",
                "\(s)://0177.\(parts[1]).\(parts[2]).\(parts[3])\(implicitPort)",
                "\(s)://127.\(parts[1]).\(parts[2]).0\(parts[3])\(implicitPort)",
                "\(s)://127.\(parts[3])\(implicitPort)",
                "\(s)://[::ffff:\(o.host)]\(implicitPort)",
                "\(s)://[::ffff:7f00:1]\(implicitPort)",
                "\(s)://localhost\(implicitPort)",
                "\(s)://127.0.0.2\(implicitPort)",
            ]
        } else if o.host == "::1" {
            none += ["\(s)://[0:0:0:0:0:0:0:1]:\(otherPort)", "\(s)://127.0.0.1\(implicitPort)", "\(s)://localhost\(implicitPort)"]
        }
        if o.host == "localhost" {
            none += ["\(s)://127.0.0.1\(implicitPort)", "\(s)://[::1]\(implicitPort)", "\(s)://localhost.localdomain\(implicitPort)",
                     "\(s)://sub.localhost\(implicitPort)"]
        }
        return (same, none)
    }

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let (same, none) = variants(of: subject.origin)
        for text in same {
            let site = try context.registry.site(forOrigin: text)
            if let site, site.id != subject.id { return .leak("\(escape(text)) resolved to another site \(site.id)") }
            if site == nil { return .error("\(escape(text)) should canonicalise to \(subject.origin) but resolved to no site") }
        }
        for text in none {
            let site: Site?
            do { site = try context.registry.site(forOrigin: text) } catch { continue }  // refused: fine
            if let site { return .leak("look-alike \(escape(text)) resolved to site \(site.id)") }
        }
        return .pass
    }
}

/// A probe's input as its outcome shows it, uncut: SiteKeepSystem's ``DisplayText/escaped(_:limit:)``.
func escape(_ s: String) -> String { DisplayText.escaped(s, limit: nil) }

/// Site identifiers that try to walk the file system.
struct SiteIDTraversalProbe: Probe {
    let name = "site-id-traversal"
    let summary = "site identifiers with ../, absolute paths, NUL or encodings are refused before any file is touched"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let t = context.neighbour(of: subject).id.string
        let attempts = ["../\(t)", "../../\(t)", "/\(t)", "\(subject.id.string)/../\(t)", "\(t)\u{0}", "\(t)/", "./\(t)",
                        "..", ".", "", "%2e%2e%2f\(t)", "..%2f\(t)", "\(t.prefix(35))/", "\(t) ", "\u{FEFF}\(t)",
                        "\(context.registry.home.path)/sites/\(t)"]
        for a in attempts {
            if let id = try? SiteID(parsing: a) { return .leak("identifier \(escape(a)) was accepted as \(id)") }
        }
        return .pass
    }
}

/// Row keys shaped like paths must stay row names: no file outside the subject's folder changes.
struct RowKeyTraversalProbe: Probe {
    let name = "row-key-traversal"
    let summary = "row keys like ../<other site>/partition.sqlite, absolute paths and NUL stay names inside the subject's database"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let t = context.neighbour(of: subject)
        let home = context.registry.home
        let before = fileList(home, excluding: context.folder(of: subject))
        let keys = ["../\(t.id.string)/partition.sqlite", "../../sites.json", "/etc/passwd", "\(context.folder(of: t).path)/partition.sqlite",
                    "..\\..\\\(t.id.string)", "a\u{0}/../../b", "%2e%2e%2f\(t.id.string)"]
        try context.withPartition(subject) { p in
            for k in keys {
                try p.storage.setItem(k, "traversal")
                try p.reading.setState(.read, for: k)
                try p.cache.store(CachedResource(url: k, body: Array("traversal".utf8)))
            }
            for k in keys {
                try p.storage.removeItem(k)
                try p.reading.setState(.unread, for: k)
                try p.cache.remove(k)
            }
        }
        let after = fileList(home, excluding: context.folder(of: subject))
        if before != after { return .leak("files outside the subject's folder changed: \(Set(after.keys).symmetricDifference(before.keys).sorted())") }
        return try context.withPartition(t) { p in
            try p.storage.getItem(AuditContext.sharedKey) == t.canaries.sharedValue ? .pass : .leak("the neighbour's data changed")
        }
    }

    /// Files (path → size and modification time) under `root`, except those under `excluding`.
    func fileList(_ root: URL, excluding: URL) -> [String: String] {
        var out: [String: String] = [:]
        guard let e = FileManager.default.enumerator(atPath: root.path) else { return out }
        let skip = excluding.path.dropFirst(root.path.count + 1)
        while let rel = e.nextObject() as? String {
            if rel.hasPrefix(skip) || rel.hasSuffix("sites.json") { continue }
            let attrs = try? FileManager.default.attributesOfItem(atPath: root.appendingPathComponent(rel).path)
            out[rel] = "\(attrs?[.size] ?? 0)/\(attrs?[.modificationDate] ?? 0)"
        }
        return out
    }
}

/// SQL metacharacters in keys are data, never SQL.
struct SQLMetacharacterProbe: Probe {
    let name = "sql-metacharacters"
    let summary = "keys such as '; DROP TABLE kv; -- and \" OR 1=1 round-trip as plain names and reach nothing else"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let keys = ["'; DROP TABLE kv; --", "\" OR \"1\"=\"1", "') OR 1=1 --", "%", "_", "*", "shared' OR ns=ns --", "\u{0}'", "x'); ATTACH DATABASE '/tmp/x' AS y; --"]
        return try context.withPartition(subject) { p in
            for (i, k) in keys.enumerated() { try p.storage.setItem(k, "sql-\(i)") }
            defer { for k in keys { try? p.storage.removeItem(k) } }
            for (i, k) in keys.enumerated() where try p.storage.getItem(k) != "sql-\(i)" {
                return .error("key \(escape(k)) did not round-trip")
            }
            for k in try p.storage.keys() {
                if let c = context.foreignCanary(in: k, subject: subject) { return .leak("keys() listed another site's \(c)") }
            }
            let t = context.neighbour(of: subject)
            let intact = try context.withPartition(t) { q in try q.storage.getItem(AuditContext.sharedKey) == t.canaries.sharedValue }
            return intact ? .pass : .leak("the neighbour's data changed")
        }
    }
}

/// A sealed row of another site written into the subject's row must not open.
struct RowSwapBetweenSitesProbe: Probe {
    let name = "row-swap-sites"
    let summary = "another site's sealed rows (storage, tabs, reading, cache) copied into the subject's rows fail to open"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let t = context.neighbour(of: subject)
        let rows: [(PartitionNamespace, String, String)] = [
            (.storage, AuditContext.sharedKey, AuditContext.sharedKey),
            (.tabs, "session", "session"),
            (.reading, t.canaries.article, subject.canaries.article),
            (.cache, t.canaries.cacheURL, subject.canaries.cacheURL),
        ]
        defer { try? context.plant(subject) }
        for (ns, from, to) in rows {
            guard let foreign = try context.withPartition(t, { try $0.rawRow(namespace: ns, name: from) }) else {
                return .error("the neighbour has no \(ns.rawValue) row to copy")
            }
            let outcome = try context.withPartition(subject) { p -> ProbeOutcome in
                guard let own = try p.rawRow(namespace: ns, name: to) else { return .error("no own \(ns.rawValue) row") }
                try p.writeRawRow(namespace: ns, name: to, sealedValue: foreign.sealedValue)
                defer { try? p.writeRawRow(namespace: ns, name: to, sealedValue: own.sealedValue) }
                return read(p, ns, to, subject: subject, context: context)
            }
            if outcome != .pass { return outcome }
        }
        return .pass
    }
}

/// Reads one row through the public API: damage is the right answer; another site's canary is a leak.
func read(_ p: Partition, _ ns: PartitionNamespace, _ name: String, subject: AuditSite, context: AuditContext) -> ProbeOutcome {
    let text: String
    do {
        switch ns {
        case .storage: text = try p.storage.getItem(name) ?? ""
        case .tabs: text = try p.tabs.session().map { $0.tabs.map(\.title).joined() } ?? ""
        case .reading: text = "\(try p.reading.state(for: name))" + (try p.reading.all().keys.joined())
        case .cache, .cacheBody: text = try p.cache.resource(for: name).map { String(decoding: $0.body, as: UTF8.self) } ?? ""
        default: text = try p.rows(ns).value(name).map { String(decoding: $0, as: UTF8.self) } ?? ""
        }
    } catch PartitionError.damaged {
        return .pass
    } catch {
        return .error("unexpected error: \(error)")
    }
    if let c = context.foreignCanary(in: text, subject: subject) { return .leak("a moved \(ns.rawValue) row returned another site's \(c)") }
    if !text.isEmpty && ns == .storage { return .leak("a moved \(ns.rawValue) row opened and returned \(escape(text))") }
    return .leak("a moved \(ns.rawValue) row opened instead of being reported as damage")
}

/// A row moved to another row of the same site must not open either.
struct RowMoveWithinSiteProbe: Probe {
    let name = "row-move-in-site"
    let summary = "a sealed value moved to another row or namespace of the same site fails to open (AD binds site, namespace and row)"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        defer { try? context.plant(subject) }
        return try context.withPartition(subject) { p -> ProbeOutcome in
            guard let own = try p.rawRow(namespace: .storage, name: subject.canaries.ownKey),
                  let shared = try p.rawRow(namespace: .storage, name: AuditContext.sharedKey) else { return .error("canary rows missing") }
            try p.writeRawRow(namespace: .storage, name: AuditContext.sharedKey, sealedValue: own.sealedValue)
            var outcome = readMoved(p, subject)
            try p.writeRawRow(namespace: .storage, name: AuditContext.sharedKey, sealedValue: shared.sealedValue)
            if outcome != .pass { return outcome }
            // Into another namespace under the same name.
            try p.writeRawRow(namespace: .reading, name: AuditContext.sharedKey, sealedValue: shared.sealedValue)
            defer { try? p.reading.setState(.unread, for: AuditContext.sharedKey) }
            do {
                let state = try p.reading.state(for: AuditContext.sharedKey)
                outcome = .leak("a storage value moved into reading opened as \(state)")
            } catch PartitionError.damaged { outcome = .pass } catch { outcome = .error("\(error)") }
            return outcome
        }
    }

    func readMoved(_ p: Partition, _ subject: AuditSite) -> ProbeOutcome {
        do {
            let v = try p.storage.getItem(AuditContext.sharedKey)
            return .leak("row '\(AuditContext.sharedKey)' returned the value of another row (\(v ?? "nil"))")
        } catch PartitionError.damaged { return .pass } catch { return .error("\(error)") }
    }
}

/// Whole database files swapped between sites.
struct FileSwapProbe: Probe {
    let name = "file-swap"
    let summary = "the subject's database file replaced by another site's fails to open (sealed header bound to the site)"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let t = context.neighbour(of: subject)
        let fm = FileManager.default
        let a = context.folder(of: subject).appendingPathComponent("partition.sqlite")
        let b = context.folder(of: t).appendingPathComponent("partition.sqlite")
        let tmp = context.folder(of: subject).appendingPathComponent("swap.tmp")
        try fm.moveItem(at: a, to: tmp)
        try fm.moveItem(at: b, to: a)
        try fm.moveItem(at: tmp, to: b)
        defer {
            try? fm.moveItem(at: a, to: tmp); try? fm.moveItem(at: b, to: a); try? fm.moveItem(at: tmp, to: b)
        }
        return openAndRead(subject, context)
    }
}

/// Opening the subject after a swap must fail as damage, or at least return none of the other's data.
func openAndRead(_ subject: AuditSite, _ context: AuditContext) -> ProbeOutcome {
    do {
        let p = try context.registry.openPartition(forIdentifier: subject.id)
        defer { p.close() }
        let shared = (try? p.storage.getItem(AuditContext.sharedKey)) ?? nil
        let text = (shared ?? "") + ((try? p.storage.keys().joined()) ?? "")
        if let c = context.foreignCanary(in: text, subject: subject) { return .leak("returned another site's \(c)") }
        return .leak("a swapped partition opened without being reported as damage")
    } catch PartitionError.damaged {
        return .pass
    } catch {
        return .error("unexpected error: \(error)")
    }
}

/// Whole site folders swapped.
struct FolderSwapProbe: Probe {
    let name = "folder-swap"
    let summary = "the subject's whole folder replaced by another site's fails to open"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let t = context.neighbour(of: subject)
        let fm = FileManager.default
        let a = context.folder(of: subject), b = context.folder(of: t)
        let tmp = a.deletingLastPathComponent().appendingPathComponent("swap-\(UUID().uuidString.lowercased())")
        try fm.moveItem(at: a, to: tmp)
        try fm.moveItem(at: b, to: a)
        try fm.moveItem(at: tmp, to: b)
        defer {
            try? fm.moveItem(at: a, to: tmp); try? fm.moveItem(at: b, to: a); try? fm.moveItem(at: tmp, to: b)
        }
        return openAndRead(subject, context)
    }
}

/// Two sites written concurrently keep their own rows.
struct ConcurrentWritersProbe: Probe {
    let name = "concurrent-writers"
    let summary = "the subject and another site written concurrently from two threads each keep only their own values"

    func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        let t = context.neighbour(of: subject)
        let pa = try context.registry.openPartition(forIdentifier: subject.id)
        let pb = try context.registry.openPartition(forIdentifier: t.id)
        defer { pa.close(); pb.close() }
        let n = 40
        let group = DispatchGroup()
        for (p, tag) in [(pa, subject.canaries.sharedValue), (pb, t.canaries.sharedValue)] {
            DispatchQueue.global().async(group: group) {
                for i in 0..<n { try? p.storage.setItem("concurrent-\(i)", "\(tag)-\(i)") }
            }
        }
        group.wait()
        defer {
            for i in 0..<n { try? pa.storage.removeItem("concurrent-\(i)"); try? pb.storage.removeItem("concurrent-\(i)") }
        }
        for i in 0..<n {
            let va = try pa.storage.getItem("concurrent-\(i)"), vb = try pb.storage.getItem("concurrent-\(i)")
            if va != "\(subject.canaries.sharedValue)-\(i)" || vb != "\(t.canaries.sharedValue)-\(i)" {
                if let c = context.foreignCanary(in: va ?? "", subject: subject) { return .leak("row \(i) holds another site's \(c)") }
                return .error("row \(i) lost a write")
            }
        }
        return .pass
    }
}
