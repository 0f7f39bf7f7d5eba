import Foundation
import Glibc
import Testing
import SiteKeepFIDO2

/// libfido2 is optional hardware's library: no SiteKeep process maps it until a key is asked for
/// (CFIDO2Loader opens it with dlopen then), so a machine without it runs SiteKeep.
struct FIDO2LoadingTests {
    /// Whether this process has libfido2 loaded: the dynamic loader's own answer (RTLD_NOLOAD
    /// loads nothing), not a read of /proc/self/maps, which can come back short.
    static func mapsLibfido2() -> Bool {
        guard let handle = dlopen("libfido2.so.1", RTLD_NOW | RTLD_NOLOAD) else { return false }
        dlclose(handle)
        return true
    }

    @Test func libfido2IsMappedOnlyOnFirstUse() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            guard !FIDO2LoadingTests.mapsLibfido2() else {
                FileHandle.standardError.write(Data("libfido2 was mapped before any key was asked for\n".utf8))
                exit(1)
            }
            do {
                _ = try FIDO2Key(path: "soft:/nonexistent/sitekeep.sock", timeoutMilliseconds: 1_000).info()
                exit(2)
            } catch {
                guard case FIDO2Error.unreachable = error else {
                    FileHandle.standardError.write(Data("unexpected error: \(error)\n".utf8))
                    exit(3)
                }
            }
            guard FIDO2LoadingTests.mapsLibfido2() else {
                FileHandle.standardError.write(Data("libfido2 was not mapped after a key was asked for\n".utf8))
                exit(4)
            }
            exit(0)
        }
        if let result, result.exitStatus != .exitCode(0) {
            Issue.record("child: \(String(decoding: result.standardErrorContent, as: UTF8.self))")
        }
    }
}
