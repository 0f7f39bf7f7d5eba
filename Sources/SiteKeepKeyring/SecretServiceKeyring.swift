internal import CSecretLoader
import Dispatch
import Synchronization

/// The freedesktop Secret Service (gnome-keyring, KWallet, KeePassXC) through libsecret.
///
/// Items use SiteKeep's own schema, `ai.sgit.SiteKeep.WrappedKey`, with the attributes `store`,
/// `kind` and `id` (none of them secret) and live in the default collection (the login keyring).
/// Blobs are stored as binary secrets (`application/octet-stream`); the bytes come back exactly,
/// NUL and 0xFF included, even though gnome-keyring reports them as `text/plain`.
///
/// Every operation runs under a deadline (``timeout``, 5 s by default): a `GCancellable` is
/// cancelled from a timer when it passes, so a locked collection whose unlock prompt nobody
/// answers gives ``KeyringError/timeout(seconds:)`` instead of a hang.
///
/// A locked collection makes libsecret's lookups return nothing without an error; SiteKeep
/// checks the default collection's lock state whenever a lookup, delete or listing comes back
/// empty, so ``KeyringError/collectionLocked`` is never mistaken for ``KeyringError/itemMissing(_:)``.
///
/// libsecret (and with it GLib, GIO and libgcrypt) is loaded with `dlopen` on first use, so the
/// file keyring never maps them and SiteKeep runs where libsecret is not installed; there, every
/// operation and ``probe(timeout:)`` answer ``KeyringError/noSecretService(_:)`` saying so.
public struct SecretServiceKeyring: KeyringBackend {
    /// The time limit of every operation, in seconds.
    public let timeout: Double

    public var kind: KeyringKind { .secretService }
    public var location: String { "Secret Service default collection (org.freedesktop.secrets on the session bus)" }

    /// A Secret Service keyring whose every operation gives up after `timeout` seconds.
    public init(timeout: Double = 5) {
        self.timeout = timeout > 0 ? timeout : 5
    }

    /// What ``probe(timeout:)`` found.
    public enum ProbeResult: Sendable, Equatable {
        /// A Secret Service answered and has a default collection.
        case available(locked: Bool)
        /// A Secret Service answered but has no default collection (no login keyring), so items
        /// cannot be stored.
        case noDefaultCollection
        /// No usable answer: no bus, no service, no answer in time, or no libsecret.
        case unavailable(KeyringError)
    }

    /// Asks the session bus whether a Secret Service answers, and whether its default collection
    /// is locked. Never takes longer than `timeout` (default: 1 s).
    public static func probe(timeout: Double = 1) -> ProbeResult {
        do {
            try loadLibrary()
            let deadline = Deadline(seconds: timeout)
            defer { deadline.finish() }
            switch try defaultCollectionLocked(deadline) {
            case .some(let locked): return .available(locked: locked)
            case .none: return .noDefaultCollection
            }
        } catch {
            return .unavailable(error)
        }
    }

    /// Loads libsecret on first use.
    private static func loadLibrary() throws(KeyringError) {
        var why: UnsafePointer<CChar>? = nil
        guard sk_secret_load(&why) == 0 else {
            throw .noSecretService(why.map { String(cString: $0) } ?? "libsecret could not be loaded")
        }
    }

    // MARK: KeyringBackend

    public func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) {
        try Self.loadLibrary()
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: item.store, kind: item.kind, id: item.id)
        defer { sk_table_unref(attributes) }
        // sk_value_new copies the bytes.
        guard let value = blob.withUnsafeBytes({ sk_value_new($0.baseAddress, $0.count) }) else {
            throw .backend("libsecret could not allocate a secret value")
        }
        defer { sk_value_unref(value) }
        var error: UnsafeMutablePointer<sk_error>?
        let stored = sk_password_store(attributes, label, value, deadline.cancellable, &error)
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        guard stored != 0 else { throw .backend("the Secret Service did not store \(item)") }
    }

    public func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        try Self.loadLibrary()
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: item.store, kind: item.kind, id: item.id)
        defer { sk_table_unref(attributes) }
        var error: UnsafeMutablePointer<sk_error>?
        let value = sk_password_lookup(attributes, deadline.cancellable, &error)
        if let failure = Self.take(&error) {
            if let value { sk_value_unref(value) }
            throw Self.map(failure, deadline)
        }
        guard let value else {
            try Self.throwIfLocked(deadline)
            throw .itemMissing(item)
        }
        defer { sk_value_unref(value) }
        return Self.bytes(of: value)
    }

    @discardableResult
    public func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool {
        try Self.loadLibrary()
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: item.store, kind: item.kind, id: item.id)
        defer { sk_table_unref(attributes) }
        var error: UnsafeMutablePointer<sk_error>?
        let cleared = sk_password_clear(attributes, deadline.cancellable, &error)
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        if cleared != 0 { return true }
        try Self.throwIfLocked(deadline)
        return false
    }

    public func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] {
        try Self.loadLibrary()
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: store, kind: kind, id: nil)
        defer { sk_table_unref(attributes) }
        var error: UnsafeMutablePointer<sk_error>?
        let found = sk_password_search(attributes, 0, deadline.cancellable, &error)
        defer { sk_list_free_objects(found) }
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        var items: [KeyringItemID] = []
        var node = found
        while let current = node {
            defer { node = sk_list_next(current) }
            guard let id = Self.itemID(sk_list_data(current), store: store, kind: kind) else { continue }
            items.append(id)
        }
        if items.isEmpty { try Self.throwIfLocked(deadline) }
        return Array(Set(items)).sorted { ($0.kind, $0.id) < ($1.kind, $1.id) }
    }

    /// One search that also loads the secrets (`SECRET_SEARCH_LOAD_SECRETS`): an unlock reads
    /// all its slots in one D-Bus round trip instead of one per slot. Items whose secret did not
    /// come with the search are loaded one by one.
    public func loadAll(store: String, kind: String?) throws(KeyringError) -> [(id: KeyringItemID, blob: [UInt8])] {
        try Self.loadLibrary()
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: store, kind: kind, id: nil)
        defer { sk_table_unref(attributes) }
        var error: UnsafeMutablePointer<sk_error>?
        let found = sk_password_search(attributes, 1, deadline.cancellable, &error)
        defer { sk_list_free_objects(found) }
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        var out: [(id: KeyringItemID, blob: [UInt8])] = []
        var missing: [KeyringItemID] = []
        var node = found
        while let current = node {
            defer { node = sk_list_next(current) }
            let data = sk_list_data(current)
            guard let id = Self.itemID(data, store: store, kind: kind) else { continue }
            // The search returns SecretItems; a loaded one carries its secret without a round trip.
            if let value = sk_item_secret(data) {
                defer { sk_value_unref(value) }
                out.append((id, Self.bytes(of: value)))
                continue
            }
            missing.append(id)
        }
        for id in missing {
            do { out.append((id, try load(id))) } catch .itemMissing { continue }
        }
        if out.isEmpty { try Self.throwIfLocked(deadline) }
        return out.sorted { ($0.id.kind, $0.id.id) < ($1.id.kind, $1.id.id) }
    }

    // MARK: Lock state

    /// Whether the default collection is locked; `nil` when there is none.
    private static func defaultCollectionLocked(_ deadline: Deadline) throws(KeyringError) -> Bool? {
        var error: UnsafeMutablePointer<sk_error>?
        let state = sk_default_collection_locked(deadline.cancellable, &error)
        if let failure = take(&error) { throw map(failure, deadline, connecting: true) }
        switch state {
        case 1: return true
        case 0: return false
        case -1: return nil
        default: throw .noSecretService("libsecret returned no service")
        }
    }

    private static func throwIfLocked(_ deadline: Deadline) throws(KeyringError) {
        if try defaultCollectionLocked(deadline) == true { throw .collectionLocked }
    }

    // MARK: GLib helpers

    /// A new attribute table (keys and values owned by the table).
    private static func attributes(store: String, kind: String?, id: String?) -> OpaquePointer {
        store.withCString { s in
            withOptionalCString(kind) { k in
                withOptionalCString(id) { i in sk_attributes_new(s, k, i)! }
            }
        }
    }

    private static func withOptionalCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let text else { return body(nil) }
        return text.withCString { body($0) }
    }

    /// The id of a search result of SiteKeep's schema in `store` (and `kind`), or nil.
    private static func itemID(_ object: UnsafeMutableRawPointer?, store: String, kind: String?) -> KeyringItemID? {
        guard let table = sk_item_attributes(object) else { return nil }
        defer { sk_table_unref(table) }
        guard let itemStore = string(table, "store"), let itemKind = string(table, "kind"), let itemID = string(table, "id"),
              itemStore == store, kind == nil || itemKind == kind else { return nil }
        return KeyringItemID(store: itemStore, kind: itemKind, id: itemID)
    }

    private static func string(_ table: OpaquePointer, _ key: String) -> String? {
        key.withCString { name in sk_table_lookup(table, name).map { String(cString: $0) } }
    }

    private static func bytes(of value: OpaquePointer) -> [UInt8] {
        var length = 0
        guard let bytes = sk_value_get(value, &length) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: length))
    }

    /// A GError copied out and freed.
    struct Failure {
        let domain: UInt32
        let code: Int32
        let message: String
    }

    private static func take(_ error: inout UnsafeMutablePointer<sk_error>?) -> Failure? {
        guard let pointer = error else { return nil }
        defer {
            sk_error_free(pointer)
            error = nil
        }
        let message = pointer.pointee.message.map { String(cString: $0) } ?? "unknown error"
        return Failure(domain: pointer.pointee.domain, code: pointer.pointee.code, message: message)
    }

    /// Turns a GError into SiteKeep's error. `connecting` marks the calls that only reach the
    /// service, whose failures all mean "no usable Secret Service".
    private static func map(_ failure: Failure, _ deadline: Deadline, connecting: Bool = false) -> KeyringError {
        let io = sk_quark_io()
        let dbus = sk_quark_dbus()
        let secret = sk_quark_secret()
        if failure.domain == io, failure.code == Int32(SK_IO_ERROR_CANCELLED) || failure.code == Int32(SK_IO_ERROR_TIMED_OUT) {
            return .timeout(seconds: deadline.seconds)
        }
        if failure.domain == dbus {
            switch failure.code {
            case Int32(SK_DBUS_ERROR_NO_REPLY), Int32(SK_DBUS_ERROR_TIMEOUT), Int32(SK_DBUS_ERROR_TIMED_OUT):
                return .timeout(seconds: deadline.seconds)
            case Int32(SK_DBUS_ERROR_SERVICE_UNKNOWN), Int32(SK_DBUS_ERROR_NAME_HAS_NO_OWNER),
                 Int32(SK_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND), Int32(SK_DBUS_ERROR_SPAWN_EXEC_FAILED),
                 Int32(SK_DBUS_ERROR_SPAWN_CHILD_EXITED), Int32(SK_DBUS_ERROR_SPAWN_FAILED),
                 Int32(SK_DBUS_ERROR_NO_SERVER), Int32(SK_DBUS_ERROR_DISCONNECTED):
                return .noSecretService(failure.message)
            case Int32(SK_DBUS_ERROR_UNKNOWN_OBJECT):
                return .backend("the Secret Service has no default collection (\(failure.message)); create a login keyring (for example with seahorse) or use --keyring file")
            default:
                break
            }
        }
        if failure.domain == io || failure.domain == sk_quark_spawn() || failure.domain == sk_quark_spawn_exit() {
            // Connecting to the bus failed: no address, no socket, autolaunch impossible.
            return .noSecretService(failure.message)
        }
        if failure.domain == secret, failure.code == Int32(SK_SECRET_ERROR_IS_LOCKED) {
            return .collectionLocked
        }
        if connecting { return .noSecretService(failure.message) }
        return .backend(failure.message)
    }
}

/// A per-operation time limit: a `GCancellable` that a timer cancels when the time is up.
private final class Deadline: @unchecked Sendable {
    // @unchecked: the pointer is immutable and GCancellable is thread-safe (g_cancellable_cancel
    // may be called from any thread); the reference is released once, in deinit.
    let cancellable: OpaquePointer
    let seconds: Double
    private let timer: DispatchWorkItem

    init(seconds: Double) {
        self.seconds = seconds
        // g_cancellable_new aborts on allocation failure rather than returning NULL.
        let cancellable = sk_cancellable_new()!
        self.cancellable = cancellable
        let box = CancellableBox(cancellable)
        timer = DispatchWorkItem { sk_cancellable_cancel(box.pointer) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
    }

    /// Stops the timer (the operation is over).
    func finish() {
        timer.cancel()
    }

    deinit {
        timer.cancel()
        sk_object_unref(UnsafeMutableRawPointer(cancellable))
    }
}

/// Holds one reference to a cancellable for the timer closure, so the timer can fire safely
/// even after the operation is over.
private final class CancellableBox: @unchecked Sendable {
    // @unchecked: immutable pointer to a thread-safe GObject, with its own reference.
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
        sk_object_ref(UnsafeMutableRawPointer(pointer))
    }
    deinit { sk_object_unref(UnsafeMutableRawPointer(pointer)) }
}
