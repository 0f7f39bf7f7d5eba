import Foundation
import SiteKeepKeyring
import Testing

/// Store and load latency, median of 100 calls each, printed for BENCHMARKS.md. Runs only with
/// `SITEKEEP_KEYRING_LATENCY=1` (timings on a shared machine are not a pass/fail matter).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["SITEKEEP_KEYRING_LATENCY"] == "1"))
struct KeyringLatencyTests {
    @Test(arguments: KeyringBehaviourTests.backends)
    func medianStoreAndLoad(_ kind: KeyringKind) throws {
        let under = try BackendUnderTest(kind)
        let blob = [UInt8](repeating: 0xA5, count: 96)  // about a wrapped 32-byte key with header
        for n in 0..<10 { try under.backend.store(blob, for: under.item("slot", "other-\(n)"), label: "x") }
        let item = under.item("slot", "timed")
        var stores: [Double] = []
        var loads: [Double] = []
        for _ in 0..<100 {
            var start = monotonicSeconds()
            try under.backend.store(blob, for: item, label: "SiteKeep latency")
            stores.append(monotonicSeconds() - start)
            start = monotonicSeconds()
            #expect(try under.backend.load(item) == blob)
            loads.append(monotonicSeconds() - start)
        }
        func median(_ values: [Double]) -> String {
            String(format: "%.3f ms", values.sorted()[values.count / 2] * 1000)
        }
        print("keyring latency \(kind.rawValue): store p50 \(median(stores)), load p50 \(median(loads))")
    }
}
