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
