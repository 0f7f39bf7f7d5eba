import Foundation
internal import SiteKeepCustody
internal import SiteKeepPartitions
internal import SiteKeepVault
internal import SiteKeepDaemon
import SiteKeepVocabulary

/// `completions bash|zsh|fish` and `man`: generated from the same command specs as `--help`.
enum DocumentationCommands {
    static var all: [CommandSpec] { [completions, completionWords, man] }

    static let completions = CommandSpec(
        path: ["completions"],
        summary: "Print a shell completion script (bash, zsh or fish)",
        discussion: """
        Install it where the shell looks, for bash: sitekeep completions bash > \
        ~/.local/share/bash-completion/completions/sitekeep (read by bash-completion in each new shell); \
        for zsh: sitekeep completions zsh > ~/.zfunc/_sitekeep, with fpath=(~/.zfunc $fpath) before \
        compinit in ~/.zshrc; for fish: sitekeep completions fish > ~/.config/fish/completions/sitekeep.fish.
        """,
        arguments: [ArgumentSpec("SHELL", "bash, zsh or fish")],
        examples: [CommandExample("sitekeep completions bash", "print the bash completion script"),
                   CommandExample("sitekeep completions fish", "print the fish completion script")],
        printsData: false
    ) { inv in
        let commands = CommandRegistry.all
        switch try inv.requiredArgument("SHELL") {
        case "bash": inv.io.write(Completions.bash(commands))
        case "zsh": inv.io.write(Completions.zsh(commands))
        case "fish": inv.io.write(Completions.fish(commands))
        case let other: throw UsageError("SHELL must be bash, zsh or fish, not '\(other)'", command: inv.spec.commandLine)
        }
    }

    /// The words the completion scripts offer past the command: one a line, nothing else.
    static let completionWords = CommandSpec(
        path: ["completions", "words"],
        summary: "Print the site origins, team key ids or vault names of the store, one a line (the completion scripts ask)",
        arguments: [ArgumentSpec("KIND", "sites, keys or vaults")],
        examples: [CommandExample("sitekeep completions words sites", "the origins of every site")],
        printsData: false
    ) { inv in
        let store = try StoreContext.open(inv)
        let words: [String]
        switch try inv.requiredArgument("KIND") {
        case "sites": words = try SiteCommands.registry(store).sites().flatMap { $0.origins.map(\.serialized) }
        case "keys": words = try store.custodian.listTeamKeys().map(\.id)
        case "vaults": words = try VaultCommands.library(store).records().map(\.name)
        case let other: throw UsageError("KIND must be sites, keys or vaults, not '\(other)'", command: inv.spec.commandLine)
        }
        for w in words.sorted() where !w.contains("\n") { inv.io.write(w + "\n") }
    }

    static let man = CommandSpec(
        path: ["man"],
        summary: "Print the sitekeep(1) manual page (roff), generated from the same help text",
        discussion: "View it with: sitekeep man | man -l -",
        examples: [CommandExample("sitekeep man", "print the manual page")],
        printsData: false
    ) { inv in
        inv.io.write(ManPage.render(CommandRegistry.all))
    }
}

enum Completions {
    static func options(of spec: CommandSpec) -> [String] {
        (spec.options.map(\.name) + spec.secretOptionSpecs.map(\.name) + CommandLineTool.globalOptions.map(\.name)).sorted()
    }

    /// What completes a value: fixed choices (`auto|secret-service|file`), files, folders, or a
    /// kind the store is asked for (`sitekeep completions words KIND`), or nothing.
    enum ValueKind: Equatable {
        case choices([String]), files, folders, store(String), none

        static func of(_ option: OptionSpec) -> ValueKind {
            guard let value = option.value else { return .none }
            if value.contains("|") { return .choices(value.split(separator: "|").map(String.init)) }
            switch value {
            case "PATH", "F", "FILE": return .files
            case "DIR": return .folders
            case "ORIGIN": return .store("sites")
            default: return option.name.hasSuffix("-vault") ? .store("vaults") : .none
            }
        }

        static func of(_ argument: ArgumentSpec, in spec: CommandSpec) -> ValueKind {
            switch (argument.name, spec.path.first) {
            case ("SITE", _): .store("sites")
            case ("ID", "team"): .store("keys")
            case ("NAME", "vault"): .store("vaults")
            case ("SHELL", _): .choices(["bash", "zsh", "fish"])
            case ("KIND", "completions"): .choices(["sites", "keys", "vaults"])
            default: .none
            }
        }
    }

    static func allOptions(of spec: CommandSpec) -> [OptionSpec] {
        spec.options + spec.secretOptionSpecs + CommandLineTool.globalOptions
    }

    static func bashCompletion(_ kind: ValueKind) -> String {
        switch kind {
        case .choices(let c): "_sitekeep_reply \"\(c.joined(separator: " "))\""
        case .files: "_sitekeep_files"
        case .folders: "_sitekeep_files -d"
        case .store(let k): "_sitekeep_store \(k)"
        case .none: ":"
        }
    }

    static func bash(_ commands: [CommandSpec]) -> String {
        // Words that may follow each prefix of command words.
        var next: [String: Set<String>] = [:]
        for c in commands {
            for i in 0..<c.path.count { next[c.path[0..<i].joined(separator: " "), default: []].insert(c.path[i]) }
        }
        let valued = Set(commands.flatMap { allOptions(of: $0).filter { $0.value != nil }.map(\.name) }).sorted()
        var out = """
        # bash completion for sitekeep (generated by 'sitekeep completions bash')
        # Completes command words, options, option values (fixed choices, files, folders) and, past
        # the command, the store's site origins, team key ids and vault names ('sitekeep completions
        # words KIND', with the --home and --keyring given on the line). File names with spaces stay
        # one word.
        _sitekeep_valued=" \(valued.joined(separator: " ")) "
        _sitekeep_prefixes="|\(next.keys.filter { !$0.isEmpty }.sorted().joined(separator: "|"))|\(commands.map { $0.path.joined(separator: " ") }.sorted().joined(separator: "|"))|"
        _sitekeep_reply() { COMPREPLY=($(compgen -W "$1" -- "$cur")); }
        _sitekeep_files() { local IFS=$'\\n'; compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen ${1:--f} -- "$cur")); }
        _sitekeep_store() {
            local IFS=$'\\n'
            COMPREPLY=($(compgen -W "$(sitekeep completions words "$1" "${store_options[@]}" 2>/dev/null)" -- "$cur"))
            # Origins hold ':', which bash splits words at: offer what follows the last one typed.
            if [[ $COMP_WORDBREAKS == *:* && $cur == *:* ]]; then
                local prefix="${cur%"${cur##*:}"}" i
                for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]="${COMPREPLY[i]#"$prefix"}"; done
            fi
        }
        _sitekeep() {
            local cur prev words_so_far="" w i npos=0 command_done=0 skip=0
            local -a store_options=()
            if declare -F _get_comp_words_by_ref >/dev/null; then _get_comp_words_by_ref -n : cur prev; else cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; fi
            for ((i = 1; i < COMP_CWORD; i++)); do
                w="${COMP_WORDS[i]}"
                if ((skip)); then skip=0; continue; fi
                case "$w" in --home|--keyring) store_options+=("$w" "${COMP_WORDS[i+1]}") ;; --home=*|--keyring=*) store_options+=("$w") ;; esac
                if [[ $w == -* ]]; then
                    command_done=1
                    [[ $w != *=* && $_sitekeep_valued == *" $w "* ]] && skip=1
                    continue
                fi
                [[ $w == : || ${COMP_WORDS[i-1]} == : ]] && continue
                if ((!command_done)) && [[ $_sitekeep_prefixes == *"|${words_so_far:+$words_so_far }$w|"* ]]; then
                    words_so_far="${words_so_far:+$words_so_far }$w"
                else
                    command_done=1; npos=$((npos + 1))
                fi
            done
            case "$words_so_far" in

        """
        for key in next.keys.sorted() {
            let spec = commands.first { $0.path.joined(separator: " ") == key }
            let words = next[key]!.sorted()
            out += "        \"\(key)\") COMPREPLY=($(compgen -W \"\(words.joined(separator: " "))\(spec.map { " " + options(of: $0).joined(separator: " ") } ?? "")\" -- \"$cur\")) ;;\n"
        }
        for c in commands where next[c.path.joined(separator: " ")] == nil {
            let opts = options(of: c)
            var values = ""
            var byCompletion: [String: [String]] = [:]
            for o in allOptions(of: c) where ValueKind.of(o) != .none { byCompletion[bashCompletion(ValueKind.of(o)), default: []].append(o.name) }
            for (completion, names) in byCompletion.sorted(by: { $0.key < $1.key }) {
                values += "\(names.joined(separator: "|"))) \(completion); return ;; "
            }
            let positional = c.arguments.map { bashCompletion(ValueKind.of($0, in: c)) }
            let files = c.options.contains { $0.value == "PATH" || $0.value == "DIR" } || !c.secretInputs.isEmpty
            let arguments = positional.enumerated().map { "\($0.offset)) \($0.element) ;; " }.joined()
            out += "        \"\(c.path.joined(separator: " "))\") case \"$prev\" in \(values)esac\n"
            out += "            if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W \"\(opts.joined(separator: " "))\" -- \"$cur\")); else case $npos in \(arguments)*) \(files ? "_sitekeep_files" : ":") ;; esac; fi ;;\n"
        }
        out += """
            esac
        }
        complete -F _sitekeep sitekeep

        """
        return out
    }

    static func zsh(_ commands: [CommandSpec]) -> String {
        var out = "#compdef sitekeep\n# zsh completion for sitekeep (generated by 'sitekeep completions zsh')\n_sitekeep() {\n  local -a commands\n  commands=(\n"
        for c in commands {
            let summary = c.summary.replacingOccurrences(of: "'", with: "'\\''").replacingOccurrences(of: ":", with: "\\:")
            out += "    '\(c.path.joined(separator: " ")):\(summary)'\n"
        }
        out += """
          )
          local line="${words[2,CURRENT-1]}"
          local -a opts vals
          local first=files v
          case "$line" in

        """
        func zshValue(_ kind: ValueKind) -> String? {
            switch kind {
            case .choices(let c): c.joined(separator: ",")
            case .files: "files"
            case .folders: "folders"
            case .store(let k): "store:" + k
            case .none: nil
            }
        }
        for c in commands {
            let vals = allOptions(of: c).compactMap { o in zshValue(ValueKind.of(o)).map { "'\(o.name)=\($0)'" } }
            let first = c.arguments.first.flatMap { zshValue(ValueKind.of($0, in: c)) } ?? "files"
            out += "    \"\(c.path.joined(separator: " "))\"*) opts=(\(options(of: c).joined(separator: " "))); vals=(\(vals.joined(separator: " "))); first='\(first)' ;;\n"
        }
        out += """
          esac
          # An option's value: fixed choices, files, folders, or the store's origins, key ids and
          # vault names ('sitekeep completions words KIND').
          for v in $vals; do
            [[ ${v%%=*} == ${words[CURRENT-1]} ]] && { _sitekeep_value ${v#*=}; return }
          done
          if [[ ${words[CURRENT]} == -* ]]; then
            compadd -- $opts
          else
            local -a next
            local c
            for c in ${commands%%:*}; do
              [[ -z $line && $c != *" "* ]] && next+=(${c})
              [[ -n $line && $c == "$line "* ]] && next+=(${${c#$line }%% *})
            done
            (( ${#next} )) && compadd -- ${(u)next} || _sitekeep_value $first
          fi
        }
        _sitekeep_value() {
          case $1 in
            files) _files ;;
            folders) _files -/ ;;
            store:*) local -a found; found=(${(f)"$(sitekeep completions words ${1#store:} 2>/dev/null)"}); compadd -- $found ;;
            *) compadd -- ${(s:,:)1} ;;
          esac
        }
        _sitekeep "$@"

        """
        return out
    }
}

extension Completions {
    /// A fish word in single quotes (fish escapes only `\\` and `'` there).
    static func fishQuoted(_ s: String) -> String {
        "'" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// The fish script: `complete` lines for each command word (under the words typed before it),
    /// each command's options (with their values: choices, files, or the store's words) and
    /// its first argument's values.
    static func fish(_ commands: [CommandSpec]) -> String {
        var next: [String: [String: String]] = [:]
        for c in commands {
            for i in 0..<c.path.count {
                let prefix = c.path[0..<i].joined(separator: " ")
                let full = c.path[0...i].joined(separator: " ")
                let summary = commands.first { $0.path.joined(separator: " ") == full }?.summary ?? "\(full) commands"
                next[prefix, default: [:]][c.path[i]] = summary
            }
        }
        let paths = commands.map { $0.path.joined(separator: " ") }.sorted()
        func fishValue(_ kind: ValueKind) -> String {
            switch kind {
            case .choices(let c): " -x -a " + fishQuoted(c.joined(separator: " "))
            case .files: " -r -F"
            case .folders: " -x -a '(__fish_complete_directories)'"
            case .store(let k): " -x -a '(sitekeep completions words \(k) 2>/dev/null)'"
            case .none: " -x"
            }
        }
        var out = """
        # fish completion for sitekeep (generated by 'sitekeep completions fish')
        # Completes command words, options, option values (fixed choices, files, folders) and the
        # store's site origins, team key ids and vault names ('sitekeep completions words KIND').
        set -g __sitekeep_commands \(paths.map(fishQuoted).joined(separator: " "))
        # The words typed before the one being completed, up to the first option.
        function __sitekeep_words
            set -l words
            for w in (commandline -opc)[2..-1]
                string match -q -- '-*' $w; and break
                set -a words $w
            end
            echo (string join ' ' $words)
        end
        # The longest command those words begin with.
        function __sitekeep_command
            set -l words (__sitekeep_words)
            set -l best ''
            for c in $__sitekeep_commands
                if test "$words" = "$c"; or string match -q -- "$c *" "$words"
                    test (string length -- "$c") -gt (string length -- "$best"); and set best $c
                end
            end
            echo $best
        end
        complete -c sitekeep -f

        """
        for prefix in next.keys.sorted() {
            for (word, summary) in next[prefix]!.sorted(by: { $0.key < $1.key }) {
                out += "complete -c sitekeep -n \(fishQuoted("test (__sitekeep_words) = \(fishQuoted(prefix))")) -a \(fishQuoted(word)) -d \(fishQuoted(summary))\n"
            }
        }
        for c in commands {
            let condition = fishQuoted("test (__sitekeep_command) = \(fishQuoted(c.path.joined(separator: " ")))")
            for o in allOptions(of: c) {
                let short = o.short.map { " -s " + String($0.dropFirst()) } ?? ""
                let value = o.value == nil ? "" : fishValue(ValueKind.of(o))
                out += "complete -c sitekeep -n \(condition) -l \(String(o.name.dropFirst(2)))\(short)\(value) -d \(fishQuoted(o.help))\n"
            }
            if let first = c.arguments.first {
                let kind = ValueKind.of(first, in: c)
                if kind != .none { out += "complete -c sitekeep -n \(condition)\(fishValue(kind))\n" }
            }
        }
        return out
    }
}

enum ManPage {
    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            .split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
    }

    static func render(_ commands: [CommandSpec]) -> String {
        var out = """
        .TH SITEKEEP 1 "2026" "sitekeep \(SiteKeepVersion.current)" "User Commands"
        .SH NAME
        sitekeep \\- a sandboxed multi\\-site state store with key custody
        .SH SYNOPSIS
        .B sitekeep
        .I command
        [\\fIoptions\\fR]
        .SH DESCRIPTION
        SiteKeep keeps one isolated, encrypted partition per web site, holds keys in the Secret Service
        (or an encrypted file) wrapped under a master key, reads sgit vaults, and answers callers through
        a small typed bridge that returns results, never keys.
        Secrets are never taken from the command line: a terminal prompt without echo, a file, or
        standard input (\\fB\\-\\fR as the file name).
        .SH GLOBAL OPTIONS

        """
        for o in CommandLineTool.globalOptions {
            out += ".TP\n.B \(escape(o.name))\(o.value.map { " \\fI\(escape($0))\\fR" } ?? "")\n\(escape(o.help))\n"
        }
        out += ".SH COMMANDS\n"
        for c in commands {
            out += ".SS \(escape(c.usage))\n\(escape(c.summary)).\n"
            if !c.discussion.isEmpty { out += ".PP\n\(escape(c.discussion))\n" }
            let opts = c.options + c.secretOptionSpecs
            for o in opts { out += ".TP\n.B \(escape(o.name))\(o.value.map { " \\fI\(escape($0))\\fR" } ?? "")\n\(escape(o.help))\n" }
            for e in c.examples { out += ".PP\nExample: \\fB\(escape(e.command))\\fR\n.br\n\(escape(e.explanation))\n" }
        }
        out += """
        .SH EXIT STATUS
        0 on success, 1 on failure (the message names the problem and the fix), 64 on a usage error.
        .SH ENVIRONMENT
        .TP
        .B SITEKEEP_HOME
        the store's root (as \\-\\-home)
        .TP
        .B SITEKEEP_KEYRING
        auto, secret\\-service or file (as \\-\\-keyring)
        .TP
        .B SITEKEEP_SOCK
        the bridge daemon's socket
        .TP
        .B SITEKEEP_ASKPASS
        a program asked to approve key uses (presence), as SSH_ASKPASS: its argument is the
        dialog's lines (a title, then the key, the op, what it is for and who asks), and it runs
        with SSH_ASKPASS_PROMPT=confirm; exit 0 approves. Without it the daemon asks through the
        system's pinentry or on your terminal (sitekeep doctor says which)
        .TP
        .B NO_COLOR
        no colour
        .SH SEE ALSO
        The guides in docs/ and SECURITY.md in the SiteKeep repository.

        """
        return out
    }
}
