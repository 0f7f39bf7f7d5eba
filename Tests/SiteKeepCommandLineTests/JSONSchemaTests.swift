import Foundation
import Testing
import SiteKeepTestSupport
@testable import SiteKeepCommandLine
import SiteKeepJSON

/// The subset of JSON Schema (2020-12) that `docs/json/commands.schema.json` uses: `type` (one
/// name or a list), `properties`, `required`, `additionalProperties` (false or a schema),
/// `items`, `enum`. Anything else in a schema is refused, so the file cannot promise more than
/// this checks.
enum MiniSchema {
    static let keywords: Set<String> = ["type", "properties", "required", "additionalProperties", "items", "enum", "description", "$comment"]

    /// Every way `value` breaks `schema`, each naming its path (`$.slots[0].id`).
    static func problems(_ value: JSONValue, _ schema: JSONValue, at path: String = "$") -> [String] {
        guard case .object(let members) = schema else { return ["\(path): the schema is not an object"] }
        var out: [String] = []
        for m in members where !keywords.contains(m.key) { out.append("\(path): unsupported schema keyword \(m.key)") }
        if let type = schema["type"] {
            let names = type.arrayValue?.compactMap(\.stringValue) ?? [type.stringValue ?? "?"]
            if !names.contains(where: { matches(value, $0) }) { out.append("\(path): \(value.typeName), not \(names.joined(separator: " or "))") }
        }
        if let allowed = schema["enum"]?.arrayValue, !allowed.contains(value) { out.append("\(path): \(JSONSerializer.string(value)) is not one of the enum") }
        if case .object(let fields) = value {
            let properties = schema["properties"]
            for name in schema["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where value[name] == nil {
                out.append("\(path): \(name) is missing")
            }
            for f in fields {
                if let p = properties?[f.key] {
                    out += problems(f.value, p, at: "\(path).\(f.key)")
                } else if let extra = schema["additionalProperties"] {
                    if extra == .bool(false) { out.append("\(path): unexpected key \(f.key)") }
                    else if case .object = extra { out += problems(f.value, extra, at: "\(path).\(f.key)") }
                }
            }
        }
        if case .array(let elements) = value, let items = schema["items"] {
            for (i, e) in elements.enumerated() { out += problems(e, items, at: "\(path)[\(i)]") }
        }
        return out
    }

    static func matches(_ v: JSONValue, _ type: String) -> Bool {
        switch (type, v) {
        case ("null", .null), ("boolean", .bool), ("integer", .int), ("number", .int), ("number", .double),
             ("string", .string), ("array", .array), ("object", .object): true
        default: false
        }
    }

    /// Object keys that are not camelCase (`dataB64`, not `data_b64`), except under an
    /// `additionalProperties` schema (a map whose keys are data, such as library names).
    static func badKeys(_ value: JSONValue, _ schema: JSONValue?, at path: String = "$") -> [String] {
        var out: [String] = []
        switch value {
        case .object(let fields):
            for f in fields {
                let declared = schema?["properties"]?[f.key]
                if declared == nil, case .object = schema?["additionalProperties"] {
                    out += badKeys(f.value, schema?["additionalProperties"], at: "\(path).*")
                    continue
                }
                if f.key.range(of: "^[a-z][a-zA-Z0-9]*$", options: .regularExpression) == nil { out.append("\(path).\(f.key)") }
                out += badKeys(f.value, declared, at: "\(path).\(f.key)")
            }
        case .array(let elements):
            for e in elements { out += badKeys(e, schema?["items"], at: "\(path)[]") }
        default: break
        }
        return out
    }

    /// A schema every one of `values` satisfies (for writing a new command's entry; review it).
    static func infer(_ values: [JSONValue]) -> JSONValue {
        let present = values.filter { $0 != .null }
        var types = Set(present.map(\.typeName))
        if types.contains("number") { types.remove("integer") }
        guard !types.isEmpty else { return .object([]) }
        if present.count < values.count { types.insert("null") }
        var members: [JSONMember] = []
        let sorted = types.sorted()
        members.append(JSONMember(key: "type", value: sorted.count == 1 ? .string(sorted[0]) : .array(sorted.map { .string($0) })))
        let objects = present.compactMap { v -> [JSONMember]? in if case .object(let m) = v { m } else { nil } }
        if !objects.isEmpty {
            var names: [String] = []
            for o in objects { for m in o where !names.contains(m.key) { names.append(m.key) } }
            let required = names.filter { n in objects.allSatisfy { o in o.contains { $0.key == n } } }
            members.append(JSONMember(key: "properties", value: .object(names.map { n in
                JSONMember(key: n, value: infer(objects.compactMap { o in o.first { $0.key == n }?.value }))
            })))
            members.append(JSONMember(key: "required", value: .array(required.map { .string($0) })))
            members.append(JSONMember(key: "additionalProperties", value: .bool(false)))
        }
        let elements = present.flatMap { v -> [JSONValue] in if case .array(let a) = v { a } else { [] } }
        if !elements.isEmpty { members.append(JSONMember(key: "items", value: infer(elements))) }
        return .object(members)
    }
}

/// Issue 18, item 6: every command's `--json` output has the shape `docs/json/commands.schema.json`
/// gives it, camelCase keys, and the one serialiser's spelling. Each command runs with `--json`
/// through its `--help` examples on the ExampleTests fixture. `SITEKEEP_WRITE_SCHEMAS=1` writes
/// the entries of commands the file lacks, inferred from the outputs, for review.
@Suite(.serialized) struct JSONSchemaTests {
    static var schemaURL: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/json/commands.schema.json")
    }

    @Test func theValidatorCatchesWhatItClaims() throws {
        let schema = try JSONParser.parse(#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string","enum":["x"]}}},"required":["a"],"additionalProperties":false}"#)
        #expect(MiniSchema.problems(try JSONParser.parse(#"{"a":1,"b":["x"]}"#), schema).isEmpty)
        #expect(MiniSchema.problems(try JSONParser.parse(#"{"b":["x"]}"#), schema) == ["$: a is missing"])
        #expect(MiniSchema.problems(try JSONParser.parse(#"{"a":"1"}"#), schema) == ["$.a: string, not integer"])
        #expect(MiniSchema.problems(try JSONParser.parse(#"{"a":1,"c":2}"#), schema) == ["$: unexpected key c"])
        #expect(MiniSchema.problems(try JSONParser.parse(#"{"a":1,"b":["y"]}"#), schema) == [#"$.b[0]: "y" is not one of the enum"#])
        #expect(MiniSchema.problems(.int(1), try JSONParser.parse(#"{"minimum":0}"#)) == ["$: unsupported schema keyword minimum"])
        #expect(MiniSchema.badKeys(try JSONParser.parse(#"{"ok":{"data_b64":1}}"#), nil) == ["$.ok.data_b64"])
    }

    /// `unlock --json` without a daemon says nothing stays unlocked (as `status` does), and
    /// `lock --json` answers.
    @Test func unlockAndLockSayWhatIsTrue() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let unlock = await store.run(["unlock", "--passphrase-file", store.passFile, "--json"])
        let u = try JSONParser.parse(unlock.out)
        #expect(u["unlocked"] == false && u["secretAccepted"] == true && u["daemon"] == false, "\(unlock.out)")
        #expect(try JSONParser.parse(await store.run(["status", "--json"]).out)["unlocked"] == u["unlocked"])
        let lock = await store.run(["lock", "--json"])
        #expect(lock.status == 0 && (try? JSONParser.parse(lock.out)) == ["locked": true, "daemon": false], "\(lock.err)")
    }

    /// `audit --json` goes through the one serialiser like every other command (Foundation's
    /// encoder wrote `"key" :` and `\/`).
    @Test func auditJSONIsWrittenByTheOneSerialiser() async throws {
        let io = CapturedIO()
        let status = await CommandLineTool.run(arguments: ["audit", "--sites", "2", "--json", "--home", "/nonexistent-home/sk"],
                                               environment: ["HOME": "/nonexistent-home"], io: io)
        #expect(status == 0, "\(io.errorOutput)")
        let text = io.output + String(decoding: io.outputBytes, as: UTF8.self)
        #expect(!text.contains("\" :") && !text.contains("\\/") && io.outputBytes.isEmpty)
        #expect(try JSONParser.parse(io.output)["passed"] == true)
    }

    @Test func everyCommandsJSONOutputHasItsDocumentedShape() async throws {
        let fixture = FileManager.default.temporaryDirectory.appendingPathComponent("sk-schemas-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: fixture) }
        _ = try await ExampleTests.prepare(fixture.appendingPathComponent("base"))
        let document = (try? JSONParser.parse(Array(try Data(contentsOf: Self.schemaURL)))) ?? .object([])
        let defs = document["$defs"] ?? .object([])
        var observed: [(String, JSONValue)] = []
        var index = 0, checked = 0
        for spec in CommandRegistry.all where spec.printsData {
            let name = spec.path.joined(separator: " ")
            for example in spec.examples where ExampleTests.cannotSucceed[example.command] == nil && !example.command.contains("--markdown") {
                index += 1
                let extra = example.command.contains("--json") ? [] : ["--json"]
                guard let r = try await ExampleTests.run(example, of: spec, fixture: fixture, index: index, extra: extra) else { continue }
                guard r.status == 0 else { Issue.record("'\(example.command) --json' failed: \(r.err)"); continue }
                #expect(!r.out.contains("\" :") && !r.out.contains("\\/"), "'\(name)' is not written by the one serialiser")
                guard let value = try? JSONParser.parse(r.out) else { Issue.record("'\(example.command) --json' printed no JSON: \(r.out.prefix(200))"); continue }
                observed.append((name, value))
                guard let schema = defs[name] else { continue }
                checked += 1
                let problems = MiniSchema.problems(value, schema)
                #expect(problems.isEmpty, "'\(example.command) --json' does not match docs/json: \(problems.prefix(5))")
                let bad = MiniSchema.badKeys(value, schema)
                #expect(bad.isEmpty, "'\(name)' has keys that are not camelCase: \(bad.prefix(5))")
            }
        }
        let missing = Set(observed.map(\.0)).filter { defs[$0] == nil }.sorted()
        if ProcessInfo.processInfo.environment["SITEKEEP_WRITE_SCHEMAS"] == "1", !missing.isEmpty {
            var members: [JSONMember] = { if case .object(let m) = defs { m } else { [] } }()
            for name in missing { members.append(JSONMember(key: name, value: MiniSchema.infer(observed.filter { $0.0 == name }.map(\.1)))) }
            var top: [JSONMember] = [JSONMember(key: "$schema", value: "https://json-schema.org/draft/2020-12/schema"),
                                     JSONMember(key: "title", value: "sitekeep --json outputs"),
                                     JSONMember(key: "description", value: .string(document["description"]?.stringValue ?? ""))]
            top.append(JSONMember(key: "$defs", value: .object(members.sorted { $0.key < $1.key })))
            try Data((JSONSerializer.string(.object(top), style: .pretty) + "\n").utf8).write(to: Self.schemaURL)
        } else {
            #expect(missing.isEmpty, "docs/json/commands.schema.json has no entry for: \(missing) (SITEKEEP_WRITE_SCHEMAS=1 writes them for review)")
        }
        #expect(checked > 40 || !missing.isEmpty)
    }
}
