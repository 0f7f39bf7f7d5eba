#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
import SiteKeepCommandLine

@main
struct SiteKeepMain {
    /// Synchronous on purpose: `prepareProcess` must run on the main thread before any other
    /// thread exists (the daemon's signal mask). The command then runs in a detached task while
    /// the main thread waits; nothing in the CLI needs the main actor.
    static func main() {
        CommandLineTool.prepareProcess(arguments: CommandLine.arguments)
        let finished = DispatchSemaphore(value: 0)
        let status = Atomic<Int32>(1)
        Task.detached {
            status.store(await CommandLineTool.processMain(), ordering: .releasing)
            finished.signal()
        }
        finished.wait()
        exit(status.load(ordering: .acquiring))
    }
}
