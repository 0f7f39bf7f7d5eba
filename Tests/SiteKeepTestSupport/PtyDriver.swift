import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A pseudo-terminal a test answers a text-mode pinentry on: it reads the screen the program
/// draws, and once `waitFor` appears there, types `keys`.
public final class PtyDriver: Sendable {
    public let master: Int32
    public let slave: Int32
    /// The terminal's path (`/dev/pts/N`).
    public let name: String
    private let screen = Mutex<[UInt8]>([])
    private let stopped = Mutex(false)

    public init() throws {
        // posix_openpt, unlockpt and ptsname by hand (Glibc's module does not export them):
        // TIOCSPTLCK unlocks the pair, TIOCGPTN gives its number.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, UInt(0x4004_5431), &unlock) == 0, ioctl(master, UInt(0x8004_5430), &number) == 0 else {
            throw CocoaError(.fileReadUnknown)
        }
        name = "/dev/pts/\(number)"
        // Held open so the terminal does not hang up between the pinentry's opens.
        slave = open(name, O_RDWR | O_NOCTTY)
    }

    /// Types `keys` once `waitFor` has been drawn (and a moment has passed for the program to
    /// wait for input), draining the screen meanwhile so the program never blocks on it.
    public func answer(_ keys: String, after waitFor: String) { answer([keys], after: waitFor) }

    /// Answers one dialog after another: each time `waitFor` is drawn anew (after the last
    /// answer), types the next of `answers`.
    public func answer(_ answers: [String], after waitFor: String) {
        answer(steps: answers.map { (waitFor, $0) })
    }

    /// Answers one dialog after another, each step waiting for its own text: once `step.0` is
    /// drawn anew (after the last answer), types `step.1`. With no steps it only keeps the
    /// screen read (``drawn``).
    public func answer(steps: [(String, String)]) {
        let master = self.master
        Thread.detachNewThread { [self] in
            var next = 0
            var since = 0          // where on the screen the next dialog starts
            var seenAt: Date? = nil
            while !stopped.withLock({ $0 }) {
                var pfd = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
                if poll(&pfd, 1, 50) > 0 {
                    var chunk = [UInt8](repeating: 0, count: 4096)
                    let n = read(master, &chunk, chunk.count)
                    if n > 0 { screen.withLock { $0 += chunk[0..<n] } }
                }
                guard next < steps.count else { continue }
                let all = screen.withLock { $0 }
                if seenAt == nil, String(decoding: all[min(since, all.count)...], as: UTF8.self).contains(steps[next].0) { seenAt = Date() }
                if let at = seenAt, Date().timeIntervalSince(at) > 0.4 {
                    _ = Array(steps[next].1.utf8).withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
                    next += 1
                    since = all.count
                    seenAt = nil
                }
            }
        }
    }

    /// Everything drawn so far.
    public var drawn: String { String(decoding: screen.withLock { $0 }, as: UTF8.self) }

    public func close() {
        stopped.withLock { $0 = true }
        usleep(100_000)
        Glibc.close(slave)
        Glibc.close(master)
    }
}

