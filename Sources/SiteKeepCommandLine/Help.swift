import Foundation

/// Help text, generated from the command specs (the man page and completions use the same).
enum Help {
    static func command(_ spec: CommandSpec) -> String {
        var out = "\(spec.summary)\n\nUsage: \(spec.usage)\n"
        if !spec.discussion.isEmpty { out += "\n\(spec.discussion)\n" }
        if !spec.arguments.isEmpty {
            out += "\nArguments:\n"
            let width = spec.arguments.map { $0.name.count }.max() ?? 0
            for a in spec.arguments {
                out += "  \(a.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(a.help)\n"
            }
        }
        let options = spec.options + spec.secretOptionSpecs
            + CommandLineTool.globalOptions.filter { $0.name != "--json" || spec.printsData }
        out += "\nOptions:\n" + optionLines(options)
        out += "\nExamples:\n"
        for e in spec.examples { out += "  \(e.command)\n      \(e.explanation)\n" }
        return out
    }

    static func optionLines(_ options: [OptionSpec]) -> String {
        let labels = options.map { o -> String in
            var label = o.short.map { "\($0), " } ?? "    "
            label += o.name
            if let v = o.value { label += " \(v)" }
            return label
        }
        let width = labels.map(\.count).max() ?? 0
        return zip(labels, options).map { "  \($0.0.padding(toLength: width, withPad: " ", startingAt: 0))  \($0.1.help)\n" }.joined()
    }

    /// The everyday commands `sitekeep help` shows, in the order of a day's use (git's short
    /// usage, not the whole list: `help --all` prints that).
    static let everyday: [[String]] = [["init"], ["unlock"], ["lock"], ["status"], ["stop"], ["config"], ["doctor"],
                                       ["team", "add"], ["team", "sign"], ["agent", "env"], ["site", "add"], ["site", "list"],
                                       ["vault", "clone"], ["vault", "pull"], ["vault", "push"], ["log", "show"]]

    /// `sitekeep help`: the everyday commands and the command groups, one screen.
    static func short(commands: [CommandSpec]) -> String {
        let picked = everyday.compactMap { path in commands.first { $0.path == path } }
        let width = picked.map { $0.path.joined(separator: " ").count }.max() ?? 0
        var out = "sitekeep: a sandboxed multi-site state store with key custody\n\nUsage: sitekeep COMMAND [options]\n\nEveryday commands:\n"
        for spec in picked {
            out += "  \(spec.path.joined(separator: " ").padding(toLength: width, withPad: " ", startingAt: 0))  \(spec.summary)\n"
        }
        var groups: [String] = []
        for spec in commands where !groups.contains(spec.path[0]) { groups.append(spec.path[0]) }
        out += "\nAll commands, by the word they start with:\n"
        var line = " "
        for g in groups {
            if line.count + g.count + 1 > 78 { out += line + "\n"; line = " " }
            line += " " + g
        }
        out += line + "\n"
        out += "\nRun 'sitekeep help --all' for every command with its summary, 'sitekeep COMMAND --help' for a command's options and examples.\n"
        return out
    }

    static func group(_ words: [String], commands: [CommandSpec]) -> String {
        let members = commands.filter { $0.path.starts(with: words) && $0.path.count > words.count }
        let title = words.isEmpty
            ? "sitekeep: a sandboxed multi-site state store with key custody"
            : "sitekeep \(words.joined(separator: " ")): commands"
        var out = "\(title)\n\nUsage: sitekeep \(words.isEmpty ? "" : words.joined(separator: " ") + " ")COMMAND [options]\n\nCommands:\n"
        let names = members.map { $0.path.dropFirst(words.count).joined(separator: " ") }
        let width = names.map(\.count).max() ?? 0
        for (name, spec) in zip(names, members) {
            out += "  \(name.padding(toLength: width, withPad: " ", startingAt: 0))  \(spec.summary)\n"
        }
        out += "\nGlobal options:\n" + optionLines(CommandLineTool.globalOptions)
        out += "\nRun 'sitekeep \(words.isEmpty ? "" : words.joined(separator: " ") + " ")COMMAND --help' for a command's options and examples.\n"
        return out
    }
}
