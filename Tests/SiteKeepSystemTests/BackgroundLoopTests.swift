#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
import SiteKeepSystem

/// What the daemon's periodic services rely on: one thread per loop, a wake that ends a nap at
/// once, a nap that ends on its own after its time, and a stop that waits for the round.
@Suite struct BackgroundLoopTests {
    private static func monotonicMs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    @Test(arguments: [BackgroundLoop.Clock.monotonic, .wall])
    func aWakeEndsALongNapAndANapEndsOnItsOwn(clock: BackgroundLoop.Clock) {
        let loop = BackgroundLoop(name: "test-loop", clock: clock)
        let naps = Mutex<[(woken: Bool, ms: Int64)]>([])
        let napping = Mutex(0)
        loop.start { loop in
            while !loop.isStopped {
                napping.withLock { $0 += 1 }
                let t0 = Self.monotonicMs()
                let woken = loop.nap(.seconds(5))
                naps.withLock { $0.append((woken, Self.monotonicMs() - t0)) }
                if naps.withLock({ $0.count }) == 1 {
                    let t1 = Self.monotonicMs()
                    let second = loop.nap(.milliseconds(50))
                    naps.withLock { $0.append((second, Self.monotonicMs() - t1)) }
                }
            }
        }
        while napping.withLock({ $0 }) == 0 { usleep(1000) }
        usleep(20_000)
        loop.wake()
        while naps.withLock({ $0.count }) < 2 { usleep(1000) }
        usleep(20_000)   // the body is in its next five-second nap
        let t0 = Self.monotonicMs()
        loop.stop()
        #expect(Self.monotonicMs() - t0 < 2500, "stop ended the nap rather than waiting it out")
        let seen = naps.withLock { $0 }
        #expect(seen[0].woken, "the wake ended the five-second nap")
        #expect(seen[0].ms < 2500, "it ended at once, not after its time (\(seen[0].ms) ms)")
        #expect(!seen[1].woken, "the second nap ran out on its own")
        #expect(seen[1].ms >= 45, "and lasted its time (\(seen[1].ms) ms)")
    }

    @Test func stopWaitsForTheRoundInProgressAndTheLoopStartsOnce() {
        let loop = BackgroundLoop(name: "test-loop")
        let rounds = Mutex(0)
        let finished = Mutex(false)
        let inRound = Mutex(false)
        #expect(loop.start { loop in
            while !loop.isStopped {
                inRound.withLock { $0 = true }
                usleep(100_000)   // a round that takes a while
                rounds.withLock { $0 += 1 }
                _ = loop.nap(.seconds(5))
            }
            finished.withLock { $0 = true }
        })
        #expect(!loop.start { _ in Issue.record("a second start must not run its body") })
        while !inRound.withLock({ $0 }) { usleep(1000) }
        let t0 = Self.monotonicMs()
        loop.stop()
        #expect(Self.monotonicMs() - t0 < 2500, "stop ended the nap rather than waiting it out")
        #expect(finished.withLock { $0 }, "stop returned only after the body did")
        #expect(rounds.withLock { $0 } == 1, "the round in progress finished")
        loop.stop()   // a second stop returns at once
        #expect(!loop.start { _ in Issue.record("a stopped loop must not start again") })
    }

    @Test func aLoopStoppedBeforeItStartedNeverRunsAndWakesBeforeANapCountOnce() {
        let never = BackgroundLoop(name: "test-loop")
        never.stop()
        #expect(!never.start { _ in Issue.record("stopped before start") })
        let loop = BackgroundLoop(name: "test-loop")
        loop.wake()
        loop.wake()
        #expect(loop.takeWake(), "a wake before the body looked is kept")
        #expect(!loop.takeWake(), "two wakes count as one, and taking it clears it")
        #expect(!loop.nap(.milliseconds(1)), "no wake pending: the nap times out")
    }
}
