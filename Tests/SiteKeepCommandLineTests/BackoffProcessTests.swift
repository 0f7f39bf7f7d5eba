import Foundation
import Testing
import SiteKeepTestSupport
@testable import SiteKeepCommandLine
@testable import SiteKeepCustody
import SiteKeepKeyring
#if canImport(Glibc)
import Glibc
#endif

/// The unlock back-off across real processes (issue 12): `sitekeep unlock` started several
/// times at once, each with a wrong passphrase, counts every failure. Before the `flock`
/// across check, attempt and update, processes that read the count together each wrote
/// "one more", and all but one of their failures were lost.
@Suite(.serialized) struct BackoffProcessTests {
    @Test func processesRacingUnlockAttemptsCountEveryFailure() async throws {
        let sitekeep = try #require(BuiltProducts.sitekeep, "build the sitekeep executable first (swift build)")
        let store = try CLIStore()
        // A KDF of a few hundred milliseconds, so the attempts overlap.
        let created = await store.run(["init", "--passphrase-file", store.passFile, "--argon2-iterations", "3",
                                       "--argon2-memory", "64", "--no-recovery"])
        #expect(created.status == 0, "\(created.err)")
        let wrong = try store.file("wrong", Array("wrong\n".utf8))
        let env = ["HOME=\(store.dir.path)", "NO_COLOR=1"]
        let racers = 3
        let pids = try (0..<racers).map { _ in
            try #require(ChildProcess.spawn(sitekeep, ["unlock", "--home", store.home, "--keyring", "file", "--passphrase-file", wrong], env: env))
        }
        for pid in pids {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            #expect((status >> 8) & 0xff == 1, "a wrong passphrase did not fail")
        }
        let custodian = try Custodian(home: StoreHome(path: store.home), keyring: try FileKeyring(folder: store.home))
        let state = try custodian.backoff.load(now: AuditLog.wallClockMs() / 1000, repair: false)
        #expect(state.failures == racers, "\(racers) racing failures were counted as \(state.failures)")
        #expect(try custodian.auditLog.entries().filter { $0.op == "unlock" && $0.result == "failed" }.count == racers)
    }
}
