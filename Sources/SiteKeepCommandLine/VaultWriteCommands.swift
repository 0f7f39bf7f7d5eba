import Foundation
internal import SiteKeepJSON
internal import SiteKeepVault
internal import SiteKeepDaemon

/// `vault write|rm|mv`: commits on this device's clone branch, signed with the device key.
enum VaultWriteCommands {
    static var all: [CommandSpec] { [write, rm, mv] }

    static let messageOption = OptionSpec.option("--message", short: "-m", value: "TEXT",
                                                 "the commit message (default: sgit's 'Commit: N added, N modified, N deleted')")

    static func emit(_ inv: Invocation, _ r: CommitResult, what: String) {
        inv.emit(.object([
            JSONMember(key: "commit", value: .string(r.commit.map { "\($0)" })),
            JSONMember(key: "parent", value: .string(r.parent.map { "\($0)" })),
            JSONMember(key: "tree", value: .string("\(r.tree)")),
            JSONMember(key: "workingCopySkipped", value: .array(r.workingCopySkipped.map { .string($0) })),
        ])) {
            let head = r.commit.map { "Committed \($0) (\(what))" } ?? "Nothing to commit: \(what) is unchanged"
            return head + (r.workingCopySkipped.isEmpty ? "" :
                "\nLeft alone in the working copy (it has local edits): " + r.workingCopySkipped.joined(separator: ", "))
        }
    }

    static let write = CommandSpec(
        path: ["vault", "write"],
        summary: "Write one file into a vault and commit it, signed with this device's key",
        discussion: """
        Reads the bytes from --file, or from standard input. The commit goes on this device's own \
        clone branch of the vault (made on the first write; a folder sgit made is adopted and its \
        working copy kept in step), signed with the device key held in custody. The blob, the \
        trees and the commit are stored durably before the branch moves, so an interrupted write \
        leaves the vault at its last commit. Push it with `sitekeep vault push`.
        """,
        arguments: [VaultCommands.vaultName, ArgumentSpec("PATH", "the file's path in the vault")],
        options: VaultCommands.unlockOptions + [.option("--file", value: "F", "read the bytes from F ('-' or absent: standard input)"), messageOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault write notes docs/plan.md --file note.txt --prf-file prf.bin", "commit note.txt as docs/plan.md")]
    ) { inv in
        let name = try inv.requiredArgument("NAME"), path = try inv.requiredArgument("PATH")
        let bytes: [UInt8]
        if let file = inv.option("--file"), file != "-" {
            bytes = try InputFile.read(file, option: "--file", limit: 1 << 30)
        } else {
            // Without --file the bytes are standard input: a secret cannot come from there too.
            if let secret = SecretSource.all.first(where: { inv.option($0.option) == "-" }), inv.option("--file") == nil {
                throw UsageError("only one input may be standard input ('-'): without --file the bytes are read from it, so \(secret.option) - cannot; give --file F or \(secret.option) as a file",
                                 command: inv.spec.commandLine)
            }
            bytes = try inv.io.readStandardInput(limit: 1 << 30)
        }
        let library = try VaultCommands.unlockedLibrary(inv)
        emit(inv, try library.write(name: name, path: path, contents: bytes, message: inv.option("--message")), what: path)
    }

    static let rm = CommandSpec(
        path: ["vault", "rm"],
        summary: "Remove one file from a vault and commit, signed with this device's key",
        arguments: [VaultCommands.vaultName, ArgumentSpec("PATH", "the file's path in the vault")],
        options: VaultCommands.unlockOptions + [messageOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault rm notes docs/a.txt --prf-file prf.bin", "remove docs/a.txt")]
    ) { inv in
        let name = try inv.requiredArgument("NAME"), path = try inv.requiredArgument("PATH")
        let library = try VaultCommands.unlockedLibrary(inv)
        emit(inv, try library.remove(name: name, path: path, message: inv.option("--message")), what: path)
    }

    static let mv = CommandSpec(
        path: ["vault", "mv"],
        summary: "Move one file in a vault and commit (the content is not re-encrypted)",
        arguments: [VaultCommands.vaultName, ArgumentSpec("FROM", "the file's path now"), ArgumentSpec("TO", "its new path")],
        options: VaultCommands.unlockOptions + [messageOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault mv notes docs/a.txt archive/a.txt --prf-file prf.bin", "move docs/a.txt to archive/")]
    ) { inv in
        let name = try inv.requiredArgument("NAME"), from = try inv.requiredArgument("FROM"), to = try inv.requiredArgument("TO")
        let library = try VaultCommands.unlockedLibrary(inv)
        emit(inv, try library.move(name: name, from: from, to: to, message: inv.option("--message")), what: "\(from) → \(to)")
    }
}
