public import SiteKeepJSON
import Foundation

/// A query a workflow step may name; the host (or the daemon) turns it into pages of the site.
public enum WorkflowQuery: String, Sendable, Hashable, CaseIterable {
    /// Articles not yet read.
    case unreadArticles = "articles.unread"
    /// Articles with open findings (a review run).
    case openFindings = "articles.open-findings"
    /// Articles changed since the reader last read them (a catch-up run).
    case changedSinceRead = "articles.changed-since-read"
    /// The next picked sessions.
    case nextSessions = "agenda.next"
    /// Unread items of the inbox.
    case unreadInbox = "inbox.unread"
}

/// One step of a workflow: a page to open, or a query whose results open as tabs.
public enum WorkflowStep: Sendable, Hashable {
    case page(url: String, title: String?)
    case query(WorkflowQuery, site: String?, title: String?)

    public var title: String? {
        switch self {
        case .page(_, let t), .query(_, _, let t): t
        }
    }

    public var json: JSONValue {
        var m: [JSONMember] = []
        switch self {
        case .page(let url, _): m.append(JSONMember(key: "page", value: .string(url)))
        case .query(let q, let site, _):
            m.append(JSONMember(key: "query", value: .string(q.rawValue)))
            if let site { m.append(JSONMember(key: "site", value: .string(site))) }
        }
        if let t = title { m.append(JSONMember(key: "title", value: .string(t))) }
        return .object(m)
    }
}

/// A reading workflow (a morning run, a review run, a catch-up run): a named sequence of steps,
/// kept as a small JSON file in the vault (`workflows/NAME.json`) so it travels, and so an agent
/// proposes one by writing a file. The schema is `docs/WORKFLOWS.md`; ``init(json:path:)``
/// enforces it and names the path of the first bad field.
public struct Workflow: Sendable, Hashable {
    public static let format = "sitekeep.workflow.v1"
    public static let maxSteps = 50
    public static let maxNameBytes = 64
    public static let maxTitleBytes = 200
    public static let maxDescriptionBytes = 2000
    public static let maxURLBytes = 2048

    public let name: String
    public let title: String
    public let description: String?
    public let steps: [WorkflowStep]

    /// - Throws: ``CoreFieldError`` for a bad name, title or step count.
    public init(name: String, title: String, description: String? = nil, steps: [WorkflowStep]) throws(CoreFieldError) {
        try Self.checkName(name, path: "workflow.name")
        try Self.checkText(title, path: "workflow.title", limit: Self.maxTitleBytes)
        guard (1...Self.maxSteps).contains(steps.count) else { throw CoreFieldError("workflow.steps", "must hold 1 to \(Self.maxSteps) steps, found \(steps.count)") }
        self.name = name; self.title = title; self.description = description; self.steps = steps
    }

    /// Reads and validates a workflow document; `path` names its root in messages.
    public init(json: JSONValue, path: String = "workflow") throws(CoreFieldError) {
        let o: JSONObjectReader
        do { o = try JSONObjectReader(json, path: path) } catch { throw CoreFieldError(path, "must be a JSON object, found \(json.typeName)") }
        var r = o
        func str(_ key: String, limit: Int, required: Bool) throws(CoreFieldError) -> String? {
            guard let v = r.optional(key) else {
                if required { throw CoreFieldError("\(path).\(key)", "is missing") }
                return nil
            }
            guard case .string(let s) = v else { throw CoreFieldError("\(path).\(key)", "must be a string, found \(v.typeName)") }
            try Self.checkText(s, path: "\(path).\(key)", limit: limit)
            return s
        }
        let format = try str("format", limit: 64, required: true)!
        guard format == Self.format else { throw CoreFieldError("\(path).format", "must be \(Self.format), found \(printable(format))") }
        let name = try str("name", limit: Self.maxNameBytes, required: true)!
        try Self.checkName(name, path: "\(path).name")
        let title = try str("title", limit: Self.maxTitleBytes, required: true)!
        let description = try str("description", limit: Self.maxDescriptionBytes, required: false)
        guard let stepsValue = r.optional("steps") else { throw CoreFieldError("\(path).steps", "is missing") }
        guard case .array(let list) = stepsValue else { throw CoreFieldError("\(path).steps", "must be an array, found \(stepsValue.typeName)") }
        guard (1...Self.maxSteps).contains(list.count) else { throw CoreFieldError("\(path).steps", "must hold 1 to \(Self.maxSteps) steps, found \(list.count)") }
        var steps: [WorkflowStep] = []
        for (i, v) in list.enumerated() { steps.append(try Self.step(v, path: "\(path).steps[\(i)]")) }
        do { try r.finish() } catch {
            if case .unknownField(let p) = error { throw CoreFieldError(p, "is not a field of \(Self.format) (format, name, title, description, steps)") }
            throw CoreFieldError(path, error.description)
        }
        self.name = name; self.title = title; self.description = description; self.steps = steps
    }

    /// Parses workflow JSON text (at most 64 KiB).
    public init(text: some Collection<UInt8>, path: String = "workflow") throws(CoreFieldError) {
        guard text.count <= 64 << 10 else { throw CoreFieldError(path, "is \(text.count) bytes; a workflow file is at most 64 KiB") }
        let v: JSONValue
        do { v = try JSONParser.parse(text, limits: .message) } catch { throw CoreFieldError(path, "is not valid JSON (\(error.description))") }
        try self.init(json: v, path: path)
    }

    static func step(_ v: JSONValue, path: String) throws(CoreFieldError) -> WorkflowStep {
        guard case .object(let members) = v else { throw CoreFieldError(path, "must be an object with page or query, found \(v.typeName)") }
        var page: String?, query: String?, site: String?, title: String?
        for m in members {
            guard case .string(let s) = m.value else { throw CoreFieldError("\(path).\(m.key)", "must be a string, found \(m.value.typeName)") }
            switch m.key {
            case "page": page = s
            case "query": query = s
            case "site": site = s
            case "title": try checkText(s, path: "\(path).title", limit: maxTitleBytes); title = s
            default: throw CoreFieldError("\(path).\(m.key)", "is not a field of a step (page, query, site, title)")
            }
        }
        switch (page, query) {
        case (let p?, nil):
            guard site == nil else { throw CoreFieldError("\(path).site", "goes with a query step; a page step names its URL") }
            try checkURL(p, path: "\(path).page")
            return .page(url: p, title: title)
        case (nil, let q?):
            guard let query = WorkflowQuery(rawValue: q) else {
                throw CoreFieldError("\(path).query", "(\(printable(q))) is not a known query (\(WorkflowQuery.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            if let site { try checkURL(site, path: "\(path).site") }
            return .query(query, site: site, title: title)
        case (nil, nil): throw CoreFieldError(path, "needs page (a URL) or query")
        case (_?, _?): throw CoreFieldError("\(path).query", "cannot go with page; a step is one or the other")
        }
    }

    static func checkName(_ name: String, path: String) throws(CoreFieldError) {
        guard (1...maxNameBytes).contains(name.utf8.count),
              name.utf8.allSatisfy({ (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2d || $0 == 0x5f }),
              name.utf8.first != 0x2d else {
            throw CoreFieldError(path, "(\(printable(name))) must be 1 to \(maxNameBytes) of a-z, 0-9, - and _ (not starting with -)")
        }
    }

    static func checkText(_ s: String, path: String, limit: Int) throws(CoreFieldError) {
        guard !s.isEmpty else { throw CoreFieldError(path, "is empty") }
        guard s.utf8.count <= limit else { throw CoreFieldError(path, "is \(s.utf8.count) bytes long; at most \(limit) are allowed") }
        guard !hasControlCharacters(s) else { throw CoreFieldError(path, "holds a control character") }
    }

    static func checkURL(_ s: String, path: String) throws(CoreFieldError) {
        guard s.utf8.count <= maxURLBytes else { throw CoreFieldError(path, "is \(s.utf8.count) bytes long; at most \(maxURLBytes) are allowed") }
        guard s.hasPrefix("https://") || s.hasPrefix("http://"), s.utf8.count > 8,
              !s.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f || $0 == 0x22 || $0 == 0x3c || $0 == 0x3e }) else {
            throw CoreFieldError(path, "(\(printable(s))) must be an absolute http or https URL without spaces")
        }
    }

    public var json: JSONValue {
        var m = [JSONMember(key: "format", value: .string(Self.format)), JSONMember(key: "name", value: .string(name)),
                 JSONMember(key: "title", value: .string(title))]
        if let description { m.append(JSONMember(key: "description", value: .string(description))) }
        m.append(JSONMember(key: "steps", value: .array(steps.map(\.json))))
        return .object(m)
    }
}

/// Where a run of a workflow is: the step shown now.
public struct WorkflowRun: Sendable, Hashable {
    public let workflow: Workflow
    /// The index of the current step.
    public private(set) var position: Int

    public init(_ workflow: Workflow, position: Int = 0) {
        self.workflow = workflow
        self.position = min(max(position, 0), workflow.steps.count - 1)
    }

    public var current: WorkflowStep { workflow.steps[position] }
    public var isLast: Bool { position == workflow.steps.count - 1 }

    /// "next": moves to the following step. - Returns: false at the last step (the run is done; it stays there).
    @discardableResult
    public mutating func next() -> Bool {
        guard !isLast else { return false }
        position += 1
        return true
    }

    /// Back to the first step.
    public mutating func restart() { position = 0 }
}

/// Where a store's workflows come from (the vault's `workflows/` folder; a local folder).
public protocol WorkflowSource: Sendable {
    /// Every workflow file: name (without `.json`) → its bytes.
    func files() throws(CoreFileError) -> [(name: String, bytes: [UInt8])]
}

/// The workflows of a source, each validated; a file that does not validate is reported, not hidden.
public struct WorkflowCatalogue: Sendable {
    public let workflows: [Workflow]
    /// Files refused, with why (the path names the file and the field).
    public let refused: [CoreFieldError]

    public init(source: any WorkflowSource) throws(CoreFileError) {
        var ok: [Workflow] = [], bad: [CoreFieldError] = []
        for f in try source.files().sorted(by: { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }) {
            do {
                let w = try Workflow(text: f.bytes, path: "workflows/\(f.name).json")
                guard w.name == f.name else {
                    bad.append(CoreFieldError("workflows/\(f.name).json.name", "is \(printable(w.name)); it must match the file's name"))
                    continue
                }
                ok.append(w)
            } catch { bad.append(error) }
        }
        workflows = ok
        refused = bad
    }

    public func workflow(named name: String) -> Workflow? { workflows.first { $0.name == name } }
}

/// The workflow files of a local folder (`*.json`, at most 200): workflows not yet in a vault, or a copy of its `workflows/`.
public struct DirectoryWorkflowSource: WorkflowSource {
    public let path: String
    public init(path: String) { self.path = path }
    public func files() throws(CoreFileError) -> [(name: String, bytes: [UInt8])] {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: path) } catch {
            throw CoreFileError(path: path, reason: "cannot list the folder")
        }
        var out: [(name: String, bytes: [UInt8])] = []
        for n in names.sorted() where n.hasSuffix(".json") && !n.hasPrefix(".") {
            guard out.count < 200, let bytes = try CoreFiles.read(path + "/" + n, limit: 64 << 10 + 1) else { continue }
            out.append((String(n.dropLast(5)), bytes))
        }
        return out
    }
}

extension WorkflowRun {
    /// `workflow.run`'s and `workflow.next`'s reply: the run's name, position, total, current
    /// step, whether it is done (at the last step and not moved), and with `withTabs` every step.
    public func positionJSON(moved: Bool, withTabs: Bool) -> JSONValue {
        var m = [JSONMember(key: "name", value: .string(workflow.name)), JSONMember(key: "position", value: .integer(position)),
                 JSONMember(key: "total", value: .integer(workflow.steps.count)), JSONMember(key: "step", value: current.json),
                 JSONMember(key: "done", value: .bool(isLast && !moved))]
        if withTabs { m.append(JSONMember(key: "tabs", value: .array(workflow.steps.map(\.json)))) }
        return .object(m)
    }
}

extension WorkflowCatalogue {
    /// `workflow.list`'s reply: each workflow's name, title and step count, and why each refused file was refused.
    public var listJSON: JSONValue {
        ["workflows": .array(workflows.map { w in ["name": .string(w.name), "title": .string(w.title), "steps": .integer(w.steps.count)] }),
         "refused": .array(refused.map { .string($0.description) })]
    }
}
