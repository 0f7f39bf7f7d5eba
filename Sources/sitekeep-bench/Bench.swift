// sitekeep-bench: SiteKeep's wrappers against the library calls they wrap, side by side.
// Driven by tools/bench; see BENCHMARKS.md.
@preconcurrency import Glibc
import Foundation
import SiteKeepCrypto
import SiteKeepHardening
import SiteKeepPartitions
import SiteKeepSystem

/// A named group of benchmarks. Later issues add custody, partitions, vault and bridge.
struct BenchGroup {
    let name: String
    let summary: String
    let run: ((Settings) throws -> [Row])?
}

var groups: [BenchGroup] { [
    BenchGroup(name: "crypto", summary: "AEAD, Argon2id, signatures and PBKDF2: wrapper vs raw call vs peer", run: cryptoGroup),
    BenchGroup(name: "custody", summary: "unlock by PRF (both keyrings), passphrase unlock vs Argon2id, signing by handle and custodian", run: custodyGroup),
    BenchGroup(name: "tpm", summary: "unlock by TPM 2.0 slot (swtpm) beside passphrase and PRF bytes, p50/p99; the PIN lock-out measured", run: tpmGroup),
    BenchGroup(name: "partitions", summary: "sealed partitions vs plain SQLite with the same schema", run: partitionsGroup),
    BenchGroup(name: "vault", summary: "sitekeep vault cat vs sgit cat, AES-GCM open by handle, vault.load latency", run: vaultGroup),
    BenchGroup(name: "vault-sync", summary: "vault commit, push, pull and clone vs the sgit CLI through the real vault server", run: vaultSyncGroup),
    BenchGroup(name: "vault-sync-probe", summary: "SiteKeep half of vault-sync only, for profiling (SITEKEEP_PROBE_ROUNDS)", run: vaultSyncProbe),
    BenchGroup(name: "bridge", summary: "key.sign over the socket vs ssh-agent over its socket", run: bridgeGroup),
    BenchGroup(name: "core", summary: "reminder planning (1,000 picks x 10,000 items) and schedule.set through the daemon, p50/p99", run: coreGroup),
    BenchGroup(name: "agent", summary: "sign requests over SiteKeep's ssh-agent socket vs OpenSSH's ssh-agent; ssh-keygen -Y sign end to end", run: agentGroup),
    BenchGroup(name: "fido2", summary: "unlock by FIDO2 hmac-secret through libfido2 and the software authenticator vs by PRF bytes, p50/p99", run: fido2Group),
] }

@main
struct SiteKeepBench {
    static func main() {
        setvbuf(stdout, nil, _IOLBF, 0)
        var markdown = false
        var settings = Settings()
        var names: [String] = []
        var args = CommandLine.arguments.dropFirst()
        if args.first == "bridge-harness" {
            // `sitekeep-bench bridge-harness WORKDIR REQUESTS`: the bridge group's harness at a
            // small size, for SiteKeepBridgeTests/BenchmarkTests (the harness must keep working).
            let a = Array(args)
            guard a.count == 3, let requests = Int(a[2]), requests > 0 else { usage("bridge-harness needs WORKDIR REQUESTS") }
            do {
                print(try BridgeBenchmark.run(requests: requests, workDir: a[1]).markdown, terminator: "")
            } catch {
                fail("bridge-harness: \(error)")
            }
            return
        }
        while let a = args.popFirst() {
            switch a {
            case "--markdown": markdown = true
            case "--quiet": settings.quiet = true
            case "--rounds":
                guard let v = args.popFirst().flatMap(Int.init), v >= 3 else { usage("--rounds needs a number ≥ 3") }
                settings.rounds = v
                settings.slowRounds = max(3, v - 2)
            case "-h", "--help": usage(nil)
            case "all": names += groups.map(\.name)
            default:
                guard groups.contains(where: { $0.name == a }) else { usage("unknown group '\(a)'") }
                names.append(a)
            }
        }
        if names.isEmpty { names = ["crypto"] }
        do {
            _ = try ProcessHardening.apply()
        } catch {
            fail("process hardening failed: \(error)")
        }
        printHeader(markdown: markdown)
        for name in names {
            guard let group = groups.first(where: { $0.name == name }) else { continue }
            guard let run = group.run else {
                print(markdown ? "### \(name)\n\n_No benchmarks yet._\n" : "== \(name) ==\n(no benchmarks yet)\n")
                continue
            }
            do {
                let rows = try run(settings)
                if name == "bridge" {
                    print(markdown ? "### bridge\n\n" + bridgeMarkdown : "== bridge ==\n" + bridgeMarkdown)
                    continue
                }
                if name == "core" {
                    print(markdown ? "### core\n\n| measurement | value |\n|---|---|" : "== core ==")
                    for (what, value) in coreTable { print(markdown ? "| \(what) | \(value) |" : "  \(what): \(value)") }
                    print("")
                    continue
                }
                if name == "agent" {
                    print(markdown ? "### agent\n\n" + agentMarkdown : "== agent ==\n" + agentMarkdown)
                    continue
                }
                if name == "partitions" {
                    print(markdown ? "### partitions\n\n| measurement (median of 3 runs) | value |\n|---|---|" : "== partitions ==")
                    for (what, value) in partitionsTable { print(markdown ? "| \(what) | \(value) |" : "  \(what): \(value)") }
                    print("")
                    continue
                }
                printTable(name, rows, markdown: markdown)
                extraTables[name]?.print(markdown: markdown)   // latency tables (custody, vault)
                if name == "crypto" {
                    let parts = try cryptoOverheadComponents(settings)
                    print(markdown ? "Fixed costs a wrapper adds per call (median):\n" : "fixed costs a wrapper adds per call (median):")
                    for (what, s) in parts { print(String(format: markdown ? "- %@: %.2f µs" : "  %@: %.2f µs", what, s * 1e6)) }
                    print("")
                }
                let missed = rows.filter { !$0.meetsTarget }.map(\.name)
                if !missed.isEmpty {
                    print((markdown ? "" : "note: ") + "missed target: " + missed.joined(separator: "; ") + "\n")
                }
            } catch {
                fail("group \(name): \(error)")
            }
        }
    }

    static func printHeader(markdown: Bool) {
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown CPU"
        let flags = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("flags") }.map { line in
                ["aes", "pclmulqdq", "avx2", "sha_ni"].filter { line.split(separator: " ").contains(Substring($0)) }
            } ?? []
        let libs = LibraryVersions.all.map { "\($0.name) \($0.version)" }.joined(separator: ", ")
        let py = (try? python("import sys, ssl; print(sys.version.split()[0], '/', ssl.OPENSSL_VERSION)")) ?? "python3 unavailable"
        let date = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Clocks.wallSeconds()))
        let lines = [
            "machine: \(cpu), \(ProcessInfo.processInfo.activeProcessorCount) cores, CPU features: \(flags.joined(separator: " "))",
            "libraries: \(libs); peer Python \(py)",
            "date: \(date); release build; figures are medians of interleaved rounds; wrapper/raw is the median of per-round time ratios (1.000 = same cost, > 1 = wrapper slower)",
        ]
        for l in lines { print(markdown ? "- \(l)" : l) }
        print("")
    }

    static func usage(_ problem: String?) -> Never {
        let text = """
        usage: sitekeep-bench [--markdown] [--rounds N] [--quiet] [GROUP ...|all]
        groups: \(groups.map { "\n  \($0.name.padding(toLength: 11, withPad: " ", startingAt: 0)) \($0.summary)" }.joined())
        """
        if let problem {
            FileHandle.standardError.write(Data("sitekeep-bench: \(problem)\n\(text)\n".utf8))
            exit(64)
        }
        print(text)
        exit(0)
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("sitekeep-bench: \(message)\n".utf8))
        exit(1)
    }
}
