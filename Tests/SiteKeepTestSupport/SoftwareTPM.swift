#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A private `swtpm` (a libtpms software TPM 2.0) on loopback TCP, for a test that needs a TPM
/// of its own: the dictionary-attack lock-out test, which must not lock out the TPM the other
/// tests share (tools/test starts that one and names it in `SITEKEEP_TPM_TCTI`). Stopped, and its
/// state folder removed, by ``stop()`` or when released (SIGTERM, then SIGKILL).
public final class SoftwareTPM: @unchecked Sendable {
    /// The TCTI string that reaches it (`swtpm:host=127.0.0.1,port=P`).
    public let tcti: String
    /// The swtpm process.
    public let pid: Int32
    let stateFolder: String
    private var stopped = false

    /// Where swtpm is installed, or nil.
    public static var executable: String? {
        ["/usr/bin/swtpm", "/usr/local/bin/swtpm"].first { access($0, X_OK) == 0 }
    }

    /// Starts one on free loopback ports; nil when swtpm is not installed or would not start.
    public static func start() -> SoftwareTPM? {
        guard let swtpm = executable else { return nil }
        for _ in 0..<5 {
            guard let port = freePortPair() else { continue }
            let state = FileManager.default.temporaryDirectory.path + "/sitekeep-swtpm-" + UUID().uuidString
            try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            guard let pid = ChildProcess.spawn(swtpm, ["socket", "--tpm2",
                                                       "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                                                       "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                                                       "--tpmstate", "dir=\(state)", "--flags", "not-need-init,startup-clear"],
                                               env: ["PATH=/usr/bin:/bin"]) else { continue }
            let tpm = SoftwareTPM(tcti: "swtpm:host=127.0.0.1,port=\(port)", pid: pid, stateFolder: state)
            if waitForListener(port: port, pid: pid) { return tpm }
            tpm.stop()
        }
        return nil
    }

    init(tcti: String, pid: Int32, stateFolder: String) {
        self.tcti = tcti
        self.pid = pid
        self.stateFolder = stateFolder
    }

    deinit { stop() }

    /// Stops the process (SIGTERM, then reaps it) and removes its state.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        // swtpm 0.7 notices SIGTERM only at its next connection: give it a moment, then SIGKILL.
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<20 {
            if waitpid(pid, &status, WNOHANG) == pid { try? FileManager.default.removeItem(atPath: stateFolder); return }
            usleep(25_000)
        }
        kill(pid, SIGKILL)
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        try? FileManager.default.removeItem(atPath: stateFolder)
    }

    /// An even port P with P and P + 1 free on loopback now (swtpm's server and control ports).
    static func freePortPair() -> UInt16? {
        for _ in 0..<20 {
            let port = UInt16.random(in: 20000...60000) & ~1
            if canBind(port), canBind(port + 1) { return port }
        }
        return nil
    }

    static func canBind(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7f000001).bigEndian
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    static func waitForListener(port: UInt16, pid: Int32, seconds: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid { return false }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = port.bigEndian
            addr.sin_addr.s_addr = UInt32(0x7f000001).bigEndian
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            close(fd)
            if ok { return true }
            usleep(20_000)
        }
        return false
    }
}
