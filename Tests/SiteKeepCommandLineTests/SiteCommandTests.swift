import Foundation
import Testing
@testable import SiteKeepCommandLine
import SiteKeepJSON
import SiteKeepTestSupport
import SiteKeepPartitions

@Suite struct SiteCommandTests {
    @Test func sitesKeepTheirOwnStorageAndUnknownSitesAreRefused() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "A", "--origin", "https://a.example", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["site", "add", "B", "--origin", "https://b.example", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["site", "storage", "set", "https://a.example", "k", "only-a"]).status == 0)
        let fromB = await store.run(["site", "storage", "get", "https://b.example", "k"])
        #expect(fromB.status == 1 && !fromB.out.contains("only-a"))
        let unknown = await store.run(["site", "storage", "get", "https://c.example", "k"])
        #expect(unknown.status == 1 && unknown.err.contains("no site has the origin"))
        let bad = await store.run(["site", "add", "C", "--origin", "http://c.example"])
        #expect(bad.status == 64, "plain http to a non-loopback host must be refused, as a usage error")
    }

    @Test func aDamagedPartitionIsReportedAndRebuiltFromTheSitesOwnVault() async throws {
        let sgit = try #require(Interop.sgitPath, "the sgit CLI is missing: run tools/setup")
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "P", "--origin", "https://promptugal.news", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["site", "storage", "set", "https://promptugal.news", "nr.schedule.v1", "{\"v\":1}"]).status == 0)
        let exported = await store.run(["site", "export", "https://promptugal.news"])
        #expect(exported.status == 0)
        #expect(try JSONParser.parse(exported.out)["storage"]?["nr.schedule.v1"] == .string("{\"v\":1}"))

        // Keep the document in a vault written by the real sgit tool.
        let vault = store.dir.appendingPathComponent("vault")
        #expect(ChildProcess.run(sgit, ["init", vault.path, "--vault-key", "site backup phrase:sites123"]) == 0)
        let docDir = vault.appendingPathComponent("sitekeep/sites")
        try FileManager.default.createDirectory(at: docDir, withIntermediateDirectories: true)
        try Data(exported.out.utf8).write(to: docDir.appendingPathComponent("promptugal.news.json"))
        #expect(ChildProcess.run("/bin/sh", ["-c", "cd '\(vault.path)' && '\(sgit)' commit -m backup >/dev/null 2>&1"]) == 0)
        let key = try store.file("vault.key", Array("site backup phrase:sites123".utf8))
        #expect(await store.run(["vault", "add", "backup", "--path", vault.path, "--key-file", key, "--passphrase-file", store.passFile]).status == 0)

        // Damage the partition: the check names it, the rebuild restores it.
        let sites = URL(fileURLWithPath: store.home).appendingPathComponent("sites")
        let folder = try #require(try FileManager.default.contentsOfDirectory(atPath: sites.path).first)
        try Data("not a database".utf8).write(to: sites.appendingPathComponent(folder).appendingPathComponent("partition.sqlite"))
        let check = await store.run(["site", "check", "https://promptugal.news"])
        #expect(check.status == 1 && check.err.contains("damaged"))
        // A site is rebuilt only from a vault it owns: not from a CLI-only vault, nor another site's.
        let unowned = await store.run(["site", "rebuild", "https://promptugal.news", "--from-vault", "backup", "--passphrase-file", store.passFile, "--json"])
        #expect(unowned.status == 1 && unowned.err.contains("\"not_owner\"") && unowned.err.contains("vault assign backup --site https://promptugal.news"), "\(unowned.err)")
        #expect(await store.run(["site", "add", "W", "--origin", "https://web-summit.sgit.ai", "--app-bound", "--passphrase-file", store.passFile]).status == 0)
        #expect(await store.run(["vault", "assign", "backup", "--site", "https://web-summit.sgit.ai", "--passphrase-file", store.passFile]).status == 0)
        let foreign = await store.run(["site", "rebuild", "https://promptugal.news", "--from-vault", "backup", "--passphrase-file", store.passFile])
        #expect(foreign.status == 1 && foreign.err.contains("belongs to W (https://web-summit.sgit.ai:443)"), "\(foreign.err)")
        #expect(await store.run(["vault", "assign", "backup", "--site", "https://promptugal.news", "--passphrase-file", store.passFile]).status == 0)
        let rebuilt = await store.run(["site", "rebuild", "https://promptugal.news", "--from-vault", "backup", "--passphrase-file", store.passFile])
        #expect(rebuilt.status == 0, "\(rebuilt.err)")
        #expect(await store.run(["site", "check", "https://promptugal.news"]).status == 0)
        let value = await store.run(["site", "storage", "get", "https://promptugal.news", "nr.schedule.v1"])
        #expect(value.out == "{\"v\":1}\n")
    }
}

/// Issue 18, item 1: destructive commands ask first (type the name) and need --yes in scripts;
/// removing a when-unlocked site or a team key needs the store unlocked.
@Suite struct DestructiveCommandTests {
    @Test func siteRemoveAsksOnATerminalAndNeedsYesInScripts() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Web Summit", "--origin", "https://web-summit.sgit.ai"]).status == 0)
        // No terminal, no --yes: refused, naming --yes; the site stays.
        let script = await store.run(["site", "remove", "https://web-summit.sgit.ai"])
        #expect(script.status == 1 && script.err.contains("--yes") && script.err.contains("no terminal"), "\(script.err)")
        // A terminal: the wrong answer removes nothing; the prompt names what goes.
        let io = CapturedIO(promptAnswers: [Array("Web".utf8)])
        let wrong = await CommandLineTool.run(arguments: ["site", "remove", "https://web-summit.sgit.ai", "--home", store.home, "--keyring", "file"],
                                              environment: ["HOME": "/nonexistent-home"], io: io)
        #expect(wrong == 1 && io.errorOutput.contains("nothing was removed"), "\(io.errorOutput)")
        #expect(io.prompts.first?.contains("Web Summit") == true && io.errorOutput.contains("the site Web Summit"))
        #expect(await store.run(["site", "list"]).out.contains("Web Summit"))
        // Typing the name removes it.
        let typed = await store.run(["site", "remove", "https://web-summit.sgit.ai"], typing: ["Web Summit"])
        #expect(typed.status == 0, "\(typed.err)")
        #expect(!(await store.run(["site", "list"]).out.contains("Web Summit")))
        // --yes removes without asking.
        #expect(await store.run(["site", "add", "N", "--origin", "https://newsroom.sgit.ai"]).status == 0)
        #expect(await store.run(["site", "remove", "https://newsroom.sgit.ai", "--yes"]).status == 0)
    }

    /// The site's core state (`core/sites/SITE`: its leads, and its vaults' inbox and workflow
    /// state) is deleted with its partition; another site's stays.
    @Test func siteRemoveDeletesTheSitesCoreStateAndNoOtherSites() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        var ids: [String] = []
        for (name, origin) in [("A", "https://a.example"), ("B", "https://b.example")] {
            let r = await store.run(["site", "add", name, "--origin", origin, "--app-bound", "--passphrase-file", store.passFile, "--json"])
            ids.append(try #require(try JSONParser.parse(r.out)["id"]?.stringValue, "\(r.err)"))
            #expect(await store.run(["remind", "plan", "--site", origin, "--session-lead", "5"]).status == 0)
        }
        let sites = store.home + "/core/sites/"
        // A vault's inbox state of A's (as `inbox --site` leaves it).
        try FileManager.default.createDirectory(atPath: sites + ids[0] + "/vaults/va", withIntermediateDirectories: true)
        try Data(#"{"format":"sitekeep.inbox-read.v1","read":[]}"#.utf8).write(to: URL(fileURLWithPath: sites + ids[0] + "/vaults/va/inbox-read.json"))
        for id in ids { #expect(FileManager.default.fileExists(atPath: sites + id + "/reminders.json")) }

        let removed = await store.run(["site", "remove", "https://a.example", "--yes"])
        #expect(removed.status == 0, "\(removed.err)")
        #expect(!FileManager.default.fileExists(atPath: sites + ids[0]), "A's core state outlived it")
        #expect(FileManager.default.fileExists(atPath: sites + ids[1] + "/reminders.json"), "B's core state went with A's")
        #expect(!removed.err.contains("not deleted"), "\(removed.err)")
    }

    @Test func removingAWhenUnlockedSiteOrATeamKeyNeedsTheStoreUnlocked() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        #expect(await store.run(["site", "add", "Drafts", "--origin", "http://localhost:8080", "--protection", "when-unlocked",
                                 "--passphrase-file", store.passFile]).status == 0)
        let locked = await store.run(["site", "remove", "http://localhost:8080", "--yes"])
        #expect(locked.status == 1 && locked.err.contains("--passphrase-file"), "\(locked.err)")
        #expect(await store.run(["site", "list"]).out.contains("Drafts"))
        let wrong = try store.file("wrong.txt", Array("not the passphrase\n".utf8))
        #expect(await store.run(["site", "remove", "http://localhost:8080", "--yes", "--passphrase-file", wrong]).status == 1)
        #expect(await store.run(["site", "list"]).out.contains("Drafts"))
        #expect(await store.run(["site", "remove", "http://localhost:8080", "--yes", "--passphrase-file", store.passFile]).status == 0)

        #expect(await store.run(["team", "add", "summit", "--passphrase-file", store.passFile]).status == 0)
        let unasked = await store.run(["team", "delete", "summit", "--passphrase-file", store.passFile])
        #expect(unasked.status == 1 && unasked.err.contains("--yes"), "\(unasked.err)")
        let noSecret = await store.run(["team", "delete", "summit", "--yes"])
        #expect(noSecret.status == 1 && noSecret.err.contains("no passphrase given"), "\(noSecret.err)")
        // On a terminal: the key id is asked for, then the passphrase.
        let typed = await store.run(["team", "delete", "summit"], typing: ["summit", "correct horse battery"])
        #expect(typed.status == 0, "\(typed.err)")
        #expect(!(await store.run(["team", "list"]).out.contains("summit")))
    }
}

/// Issue 18, item 2: messages that name the real cause.
@Suite struct RealCauseMessageTests {
    @Test func aSiteIsNamedByOriginNameOrIdPrefixAndABareHostGetsDidYouMean() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let added = await store.run(["site", "add", "News", "--origin", "https://news.example.com", "--json"])
        let id = try #require(try JSONParser.parse(added.out)["id"]?.stringValue)
        #expect(await store.run(["site", "storage", "set", "https://news.example.com", "k", "v"]).status == 0)
        let bare = await store.run(["site", "storage", "get", "news.example.com", "k"])
        #expect(bare.status == 1 && bare.err.contains("did you mean https://news.example.com?"), "\(bare.err)")
        #expect(await store.run(["site", "storage", "get", "News", "k"]).out == "v\n")
        #expect(await store.run(["site", "storage", "get", String(id.prefix(8)), "k"]).out == "v\n")
        let near = await store.run(["site", "storage", "get", "Nesw", "k"])
        #expect(near.status == 1 && near.err.contains("did you mean 'News'"), "\(near.err)")
    }

    @Test func twoInputsFromStandardInputAreRefusedAsSuch() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        for args in [["vault", "remote", "add", "notes", "origin", "https://x.example", "--token-file", "-", "--passphrase-file", "-"],
                     ["vault", "write", "notes", "a.txt", "--passphrase-file", "-"]] {
            let r = await store.run(args, stdin: Array("correct horse battery\n".utf8))
            #expect(r.status == 64 && r.err.contains("only one input may be standard input"), "\(args): \(r.err)")
        }
    }

    @Test func aWrongTypedPassphraseIsAskedAgainUpToThreeTimes() async throws {
        let store = try CLIStore()
        _ = try await store.initialize()
        let twice = await store.run(["team", "add", "summit"], typing: ["wrong one", "wrong two", "correct horse battery"])
        #expect(twice.status == 0 && twice.err.components(separatedBy: "does not unlock this store").count == 3, "\(twice.err)")
        let thrice = await store.run(["team", "add", "other"], typing: ["a", "b", "c", "correct horse battery"])
        #expect(thrice.status == 1 && thrice.err.contains("could not unlock"), "\(thrice.err)")
        // A passphrase from a file is tried once.
        let wrong = try store.file("wrong.txt", Array("nope\n".utf8))
        let once = await store.run(["team", "add", "third", "--passphrase-file", wrong], typing: ["correct horse battery"])
        #expect(once.status == 1 && !once.err.contains("does not unlock this store"), "\(once.err)")
    }

    @Test func aShortNewPassphraseIsWarnedOf() async throws {
        let store = try CLIStore()
        let short = try store.file("short.txt", Array("abc\n".utf8))
        let r = await store.run(["init", "--passphrase-file", short, "--argon2-iterations", "2", "--argon2-memory", "19"])
        #expect(r.status == 0 && r.err.contains("warning: the new passphrase has only 3 characters"), "\(r.err)")
        let other = try CLIStore()
        let long = await other.run(["init", "--passphrase-file", other.passFile, "--argon2-iterations", "2", "--argon2-memory", "19"])
        #expect(long.status == 0 && !long.err.contains("warning"))
    }
}
