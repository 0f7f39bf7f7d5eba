// A probe tools/sanitize builds with -sanitize=thread: four threads update one dictionary, only
// ever inside `Synchronization.Mutex.withLock`. A correct program. If ThreadSanitizer reports a
// race here, this toolchain's TSan cannot see Swift's Mutex (on Linux it parks on a futex that
// TSan does not intercept), and reports whose both accesses sit inside `withLock` bodies are
// that blindness, not races.
import Foundation
import Synchronization

final class Box: Sendable { let m = Mutex<[Int: Int]>([:]) }
let box = Box()
let done = DispatchSemaphore(value: 0)
for t in 0..<4 {
    Thread {
        for i in 0..<20_000 { box.m.withLock { $0[i % 64, default: 0] += t } }
        done.signal()
    }.start()
}
for _ in 0..<4 { done.wait() }
print(box.m.withLock { $0.count })
