#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// The process's environment and working folder, read from libc (no Foundation).
public enum ProcessEnvironment {
    /// Every `NAME=value` of `environ`; a name given twice keeps its first value, as `getenv` does.
    public static func current() -> [String: String] {
        var out: [String: String] = [:]
        let start: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ   // NULL after clearenv()
        guard var entry = start else { return out }
        while let cString = entry.pointee {
            let pair = String(cString: cString)
            if let eq = pair.utf8.firstIndex(of: UInt8(ascii: "=")) {
                let name = String(pair[..<eq])
                if out[name] == nil { out[name] = String(pair[pair.index(after: eq)...]) }
            }
            entry += 1
        }
        return out
    }

    /// The working folder (`getcwd`), nil when it cannot be read (removed, or too long).
    public static func workingDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The path of this process's executable (`/proc/self/exe`), nil when it cannot be read.
    public static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// A detached POSIX thread (no Foundation): what a listener runs its accept loop and each
/// connection on.
public enum SystemThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Runs `body` on a new detached thread.
    /// - Returns: false when the thread could not be created (`body` then never runs).
    @discardableResult
    public static func detach(_ body: @escaping @Sendable () -> Void) -> Bool {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let started = pthread_create(&thread, &attributes, { raw in
            let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
            body.run()
            return nil
        }, context)
        if started != 0 {
            Unmanaged<Body>.fromOpaque(context).release()
            return false
        }
        return true
    }
}

/// The descriptors a process inherited from whoever started it.
/// A process that holds what others of the same user must not reach (a site's host) makes itself
/// non-dumpable first thing: no `ptrace` attach, no `/proc/PID/mem` or `/proc/PID/environ` read
/// by another process of the user, and no core dump (`PR_SET_DUMPABLE` 0; an `execve` sets it
/// back for the program started).
public enum TracingGuard {
    /// Makes this process non-dumpable; false when the kernel refused.
    @discardableResult
    public static func forbid() -> Bool { sitekeep_set_dumpable(0) == 0 }
}

public enum InheritedDescriptors {
    /// Closes every open descriptor from 3 up (standard input, output and error stay): for a
    /// program that must hold only what it opens itself. A SiteKeep host calls it first thing,
    /// so a connection opened by whoever started it, and kept across `execve`, is not the
    /// host's (the daemon refuses a host that does not hold its own connection). Returns how
    /// many were closed.
    /// `keeping` names descriptors to leave open (a host started by the daemon keeps its
    /// channel, descriptor 3).
    @discardableResult
    public static func closeAll(keeping: Set<Int32> = []) -> Int {
        guard let dir = opendir("/proc/self/fd") else { return 0 }
        let own = dirfd(dir)
        var numbers: [Int32] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let n = Int32(name), n >= 3, n != own, !keeping.contains(n) { numbers.append(n) }
        }
        closedir(dir)
        for n in numbers { close(n) }
        return numbers.count
    }
}
