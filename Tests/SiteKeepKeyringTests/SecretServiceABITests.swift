import CSecret
import CSecretLoader
import Foundation
import SiteKeepTestSupport
import Testing

/// CSecretLoader declares the few GLib and libsecret types and constants it needs by hand (so no
/// SiteKeep binary links libsecret); these tests hold every one of them to the real headers.
@Suite struct SecretServiceABITests {
    @Test func layoutsMatchTheHeaders() {
        #expect(sk_schema_size() == MemoryLayout<SecretSchema>.size)
        #expect(sk_schema_attributes_offset() == MemoryLayout<SecretSchema>.offset(of: \.attributes))
        #expect(sk_schema_reserved_offset() == MemoryLayout<SecretSchema>.offset(of: \.reserved))
        #expect(MemoryLayout<sk_error>.size == MemoryLayout<GError>.size)
        #expect(MemoryLayout<sk_error>.offset(of: \.domain) == MemoryLayout<GError>.offset(of: \.domain))
        #expect(MemoryLayout<sk_error>.offset(of: \.code) == MemoryLayout<GError>.offset(of: \.code))
        #expect(MemoryLayout<sk_error>.offset(of: \.message) == MemoryLayout<GError>.offset(of: \.message))
        // The loader reads GList's data and next fields at these offsets.
        #expect(MemoryLayout<GList>.offset(of: \.data) == 0)
        #expect(MemoryLayout<GList>.offset(of: \.next) == MemoryLayout<UnsafeRawPointer>.size)
    }

    @Test func constantsMatchTheHeaders() {
        #expect(Int(SK_IO_ERROR_CANCELLED) == Int(G_IO_ERROR_CANCELLED.rawValue))
        #expect(Int(SK_IO_ERROR_TIMED_OUT) == Int(G_IO_ERROR_TIMED_OUT.rawValue))
        let dbus: [(Int, UInt32)] = [
            (Int(SK_DBUS_ERROR_SERVICE_UNKNOWN), G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue),
            (Int(SK_DBUS_ERROR_NAME_HAS_NO_OWNER), G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue),
            (Int(SK_DBUS_ERROR_NO_REPLY), G_DBUS_ERROR_NO_REPLY.rawValue),
            (Int(SK_DBUS_ERROR_NO_SERVER), G_DBUS_ERROR_NO_SERVER.rawValue),
            (Int(SK_DBUS_ERROR_TIMEOUT), G_DBUS_ERROR_TIMEOUT.rawValue),
            (Int(SK_DBUS_ERROR_DISCONNECTED), G_DBUS_ERROR_DISCONNECTED.rawValue),
            (Int(SK_DBUS_ERROR_TIMED_OUT), G_DBUS_ERROR_TIMED_OUT.rawValue),
            (Int(SK_DBUS_ERROR_SPAWN_EXEC_FAILED), G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue),
            (Int(SK_DBUS_ERROR_SPAWN_CHILD_EXITED), G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue),
            (Int(SK_DBUS_ERROR_SPAWN_FAILED), G_DBUS_ERROR_SPAWN_FAILED.rawValue),
            (Int(SK_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND), G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND.rawValue),
            (Int(SK_DBUS_ERROR_UNKNOWN_OBJECT), G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue),
        ]
        for (mine, theirs) in dbus { #expect(mine == Int(theirs)) }
        #expect(Int(SK_SECRET_ERROR_IS_LOCKED) == Int(SECRET_ERROR_IS_LOCKED.rawValue))
        // The values loader.c passes as literals.
        #expect(SECRET_SEARCH_ALL.rawValue == 1 << 1)
        #expect(SECRET_SEARCH_LOAD_SECRETS.rawValue == 1 << 3)
        #expect(SECRET_SCHEMA_NONE.rawValue == 0)
        #expect(SECRET_SCHEMA_ATTRIBUTE_STRING.rawValue == 0)
        #expect(SECRET_SERVICE_NONE.rawValue == 0)
        #expect(SECRET_COLLECTION_NONE.rawValue == 0)
    }

    /// The CLI does not link libsecret or GLib: the file keyring path never maps them, and the
    /// binary starts where libsecret is not installed.
    @Test func theCLIDoesNotLinkLibsecret() throws {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        for _ in 0..<2 { dir = dir.deletingLastPathComponent() }
        let binary = dir.appendingPathComponent(".build/debug/sitekeep").path
        // tools/test builds every product first; a missing binary fails rather than passing unseen.
        try #require(FileManager.default.isExecutableFile(atPath: binary), "build the sitekeep executable first (swift build)")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/readelf"), "readelf (binutils) is needed")
        let out = dir.appendingPathComponent(".build/sitekeep-needed.txt").path
        #expect(ChildProcess.run("/bin/sh", ["-c", "/usr/bin/readelf -d '\(binary)' > '\(out)'"]) == 0)
        let needed = try String(contentsOfFile: out, encoding: .utf8)
        #expect(needed.contains("libsodium"))   // the listing is real
        for library in ["libsecret", "libglib", "libgio", "libgobject"] {
            #expect(!needed.contains(library), "sitekeep links \(library)")
        }
    }
}
