import Foundation
import Testing
@testable import SiteKeepCommandLine

/// Issue 18, item 7: every `$ sitekeep …` command shown in a fenced block of README.md and
/// docs/*.md runs against the ExampleTests fixture (as ExampleTests does for `--help`), so a doc
/// cannot drift: each must name a real command with real options and arguments, never a usage
/// error. Commands that would wait on a daemon, a window or the network are parsed only.
@Suite(.serialized) struct DocsCommandTests {
    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The `sitekeep` command lines of the fenced blocks of `text`: `$ sitekeep …` lines, with
    /// `\` continuations joined, cut at the first unquoted shell operator (`>`, `|`, `;`, `&`,
    /// `#`); nil for a line the test cannot run without a shell (`$(…)`, `$VAR`).
    static func commands(in text: String) -> [String?] {
        var out: [String?] = [], inBlock = false, pending: String? = nil
        for raw in text.components(separatedBy: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("```") { inBlock.toggle(); pending = nil; continue }
            guard inBlock else { continue }
            if var p = pending {
                p += " " + line
                if p.hasSuffix("\\") { pending = String(p.dropLast()); continue }
                pending = nil
                out.append(cut(p))
                continue
            }
            guard line.hasPrefix("$ sitekeep ") else { continue }
            let command = String(line.dropFirst(2))
            if command.hasSuffix("\\") { pending = String(command.dropLast()); continue }
            out.append(cut(command))
        }
        return out
    }

    static func cut(_ command: String) -> String? {
        var quote: Character? = nil, result = ""
        for c in command {
            if let q = quote { if c == q { quote = nil } } else if c == "'" || c == "\"" { quote = c } else if "<>|;&#".contains(c) { break }
            if quote != "'" && c == "$" { return nil }
            result.append(c)
        }
        return result.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "  ", with: " ")
    }

    static let parseOnly: Set<[String]> = [["serve"], ["browse"], ["call"], ["vault", "clone"], ["vault", "pull"], ["vault", "push"],
                                           ["agenda", "load"], ["agent", "env"]]

    @Test func theCommandScannerCutsAtShellOperators() {
        let text = "```\n$ sitekeep a --x 'y > z' > out.json\n$ sitekeep b \\\n  --c d\nsitekeep: output\n$ echo $(sitekeep c)\n$ sitekeep d \"$(x)\"\n$ sitekeep e < /dev/null\n```\n$ sitekeep outside"
        #expect(Self.commands(in: text) == ["sitekeep a --x 'y > z'", "sitekeep b --c d", nil, "sitekeep e"])
    }

    @Test func everyCommandInTheReadmeAndGuidesRuns() async throws {
        let fixture = FileManager.default.temporaryDirectory.appendingPathComponent("sk-docs-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: fixture) }
        _ = try await ExampleTests.prepare(fixture.appendingPathComponent("base"))
        let docs = try FileManager.default.contentsOfDirectory(atPath: Self.repository.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
        var ran = 0, skipped = 0
        for file in ["README.md"] + docs {
            let text = try String(contentsOf: Self.repository.appendingPathComponent(file), encoding: .utf8)
            for command in Self.commands(in: text) {
                guard let command else { skipped += 1; continue }
                let words = ExampleTests.words(command).dropFirst()
                let parsed: (CommandSpec?, Invocation?, String?)
                do {
                    parsed = try CommandLineTool.parse(Array(words) + ["--home", "/nonexistent-home/sk"], environment: [:], io: CapturedIO(),
                                                       commands: CommandRegistry.all)
                } catch let usage as UsageError {
                    Issue.record("\(file): '\(command)' is a usage error: \(usage.message)")
                    continue
                }
                ran += 1
                guard let spec = parsed.0, !Self.parseOnly.contains(spec.path) else { continue }
                guard let r = try await ExampleTests.run(CommandExample(command, ""), of: spec, fixture: fixture, index: ran) else { continue }
                #expect(r.status != 64, "\(file): '\(command)' is a usage error: \(r.err)")
            }
        }
        #expect(ran > 80, "only \(ran) commands found (\(skipped) need a shell)")
    }
}
