import Foundation
internal import SiteKeepJSON
internal import SiteKeepVault

/// `vault fsck NAME [--repair]` (issue 50): every object reachable from the refs read and its id
/// checked; damaged fetched objects fetched again with `--repair`, local unpushed ones reported.
enum VaultFsckCommand {
    static let fsck = CommandSpec(
        path: ["vault", "fsck"],
        summary: "Check every object of a vault's clone; with --repair, fetch damaged or missing fetched objects again from its remote",
        discussion: """
        Reads every commit, tree and blob reachable from the vault's refs and checks each \
        against its id (SHA-256 of its bytes). Objects fetched from the remote (clone, pull) are \
        a cache of it, written without an fsync of their own: a power loss can leave some \
        missing or torn, and a read fetches such an object again by itself. --repair fetches \
        every damaged or missing fetched object again now (from the remote the vault last \
        pulled from, else origin), each checked against its id before it is stored. Objects \
        written on this machine and not pushed (your commits, their trees and files) are never \
        fetched: a damaged one is reported, and only a backup of the folder brings it back. \
        Exits 1 while any damage is left.
        """,
        arguments: [VaultCommands.vaultName],
        options: VaultCommands.unlockOptions + [.flag("--repair", "fetch damaged or missing fetched objects again from the vault's remote")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep vault fsck notes --prf-file prf.bin", "check every object of the clone"),
                   CommandExample("sitekeep vault fsck notes --repair --prf-file prf.bin --json",
                                  "check it, fetch damaged fetched objects again, report as JSON")]
    ) { inv in
        let o = try VaultCommands.opened(inv, try VaultCommands.unlockedLibrary(inv))
        let name = o.record.name
        let repair = inv.flag("--repair")
        let report = try o.vault.fsck(repair: repair)
        inv.emit(json(name: name, repair: repair, report)) { text(name: name, report) }
        let left = report.problems.filter { !$0.repaired }
        guard left.isEmpty else {
            let local = left.contains { !$0.fetched }
            let fetched = left.contains { $0.fetched }
            var remedy: [String] = []
            if fetched {
                remedy.append(repair ? "fetched objects: run `sitekeep vault fsck \(name) --repair` again when the remote can be reached (or `sitekeep vault pull \(name)` when online)"
                                     : "fetched objects: run `sitekeep vault fsck \(name) --repair` to fetch them again")
            }
            if local { remedy.append("objects written here and not pushed: restore the folder from a backup, or write the lost files again") }
            throw CommandFailure("vault \(name) has \(left.count) damaged or missing object\(left.count == 1 ? "" : "s")",
                                 remedy: remedy.joined(separator: "; "), code: "vault_damaged")
        }
    }

    static func json(name: String, repair: Bool, _ r: FsckReport) -> JSONValue {
        .object([
            JSONMember(key: "vault", value: .string(name)),
            JSONMember(key: "healthy", value: .bool(r.isHealthy)),
            JSONMember(key: "repair", value: .bool(repair)),
            JSONMember(key: "commits", value: .integer(r.commits)),
            JSONMember(key: "trees", value: .integer(r.trees)),
            JSONMember(key: "blobs", value: .integer(r.blobs)),
            JSONMember(key: "problems", value: .array(r.problems.map { p in
                .object([
                    JSONMember(key: "object", value: .string(p.object)), JSONMember(key: "kind", value: .string(p.kind)),
                    JSONMember(key: "damage", value: .string(p.damage)),
                    JSONMember(key: "origin", value: .string(p.fetched ? "fetched" : "local")),
                    JSONMember(key: "repaired", value: .bool(p.repaired)),
                    JSONMember(key: "reason", value: p.reason.map { .string($0) } ?? .null),
                ])
            })),
        ])
    }

    static func text(name: String, _ r: FsckReport) -> String {
        var out = "vault \(name): \(r.commits) commits, \(r.trees) trees, \(r.blobs) blobs checked"
        let repaired = r.problems.filter(\.repaired).count
        if r.problems.isEmpty { return out + "; no damage" }
        out += "; \(r.problems.count) damaged or missing" + (repaired > 0 ? ", \(repaired) fetched again" : "")
        for p in r.problems {
            let origin = p.fetched ? "fetched" : "written here, not pushed"
            let outcome = p.repaired ? "fetched again" : "NOT repaired" + (p.reason.map { ": \($0)" } ?? "")
            out += "\n  \(p.repaired ? "✓" : "✗") \(p.object) (\(p.kind), \(origin)): \(p.damage); \(outcome)"
        }
        return out
    }
}
