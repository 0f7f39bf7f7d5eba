internal import CSecret
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
        /// No usable answer: no bus, no service, or no answer in time.
        case unavailable(KeyringError)
    }

    /// Asks the session bus whether a Secret Service answers, and whether its default collection
    /// is locked. Never takes longer than `timeout` (default: 1 s).
    public static func probe(timeout: Double = 1) -> ProbeResult {
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        do {
            switch try defaultCollectionLocked(deadline) {
            case .some(let locked): return .available(locked: locked)
            case .none: return .noDefaultCollection
            }
        } catch {
            return .unavailable(error)
        }
    }

    // MARK: KeyringBackend

    public func store(_ blob: [UInt8], for item: KeyringItemID, label: String) throws(KeyringError) {
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: item.store, kind: item.kind, id: item.id)
        defer { g_hash_table_unref(attributes) }
        // secret_value_new copies the bytes; a one-byte dummy gives it a valid pointer for an
        // empty blob.
        let value: OpaquePointer? = blob.isEmpty
            ? secret_value_new("", 0, "application/octet-stream")
            : blob.withUnsafeBytes { raw in
                secret_value_new(raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count,
                                 "application/octet-stream")
            }
        guard let value else { throw .backend("libsecret could not allocate a secret value") }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var error: UnsafeMutablePointer<GError>?
        let stored = secret_password_storev_binary_sync(
            sitekeep_secret_schema(), attributes, nil, label, value, deadline.cancellable, &error)
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        guard stored != 0 else { throw .backend("the Secret Service did not store \(item)") }
    }

    public func load(_ item: KeyringItemID) throws(KeyringError) -> [UInt8] {
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: item.store, kind: item.kind, id: item.id)
        defer { g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        let value = secret_password_lookupv_binary_sync(
            sitekeep_secret_schema(), attributes, deadline.cancellable, &error)
        if let failure = Self.take(&error) {
            if let value { secret_value_unref(UnsafeMutableRawPointer(value)) }
            throw Self.map(failure, deadline)
        }
        guard let value else {
            try Self.throwIfLocked(deadline)
            throw .itemMissing(item)
        }
        defer { secret_value_unref(UnsafeMutableRawPointer(value)) }
        var length = 0
        guard let bytes = secret_value_get(value, &length) else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: length))
    }

    @discardableResult
    public func delete(_ item: KeyringItemID) throws(KeyringError) -> Bool {
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: item.store, kind: item.kind, id: item.id)
        defer { g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        let cleared = secret_password_clearv_sync(
            sitekeep_secret_schema(), attributes, deadline.cancellable, &error)
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        if cleared != 0 { return true }
        try Self.throwIfLocked(deadline)
        return false
    }

    public func list(store: String, kind: String?) throws(KeyringError) -> [KeyringItemID] {
        let deadline = Deadline(seconds: timeout)
        defer { deadline.finish() }
        let attributes = Self.attributes(store: store, kind: kind, id: nil)
        defer { g_hash_table_unref(attributes) }
        var error: UnsafeMutablePointer<GError>?
        let found = secret_password_searchv_sync(
            sitekeep_secret_schema(), attributes, SECRET_SEARCH_ALL, deadline.cancellable, &error)
        defer { if let found { g_list_free_full(found, g_object_unref) } }
        if let failure = Self.take(&error) { throw Self.map(failure, deadline) }
        var items: [KeyringItemID] = []
        var node = found
        while let current = node {
            if let data = current.pointee.data,
               let table = secret_retrievable_get_attributes(OpaquePointer(data)) {
                defer { g_hash_table_unref(table) }
                if let itemStore = Self.string(table, "store"), let itemKind = Self.string(table, "kind"),
                   let itemID = Self.string(table, "id"), itemStore == store, kind == nil || itemKind == kind {
                    items.append(KeyringItemID(store: itemStore, kind: itemKind, id: itemID))
                }
            }
            node = current.pointee.next
        }
        if items.isEmpty { try Self.throwIfLocked(deadline) }
        return Array(Set(items)).sorted { ($0.kind, $0.id) < ($1.kind, $1.id) }
    }

    // MARK: Lock state

    /// Whether the default collection is locked; `nil` when there is none.
    private static func defaultCollectionLocked(_ deadline: Deadline) throws(KeyringError) -> Bool? {
        var error: UnsafeMutablePointer<GError>?
        let service = secret_service_get_sync(SECRET_SERVICE_NONE, deadline.cancellable, &error)
        if let failure = take(&error) {
            if let service { g_object_unref(service) }
            throw map(failure, deadline, connecting: true)
        }
        guard let service else { throw .noSecretService("libsecret returned no service") }
        defer { g_object_unref(service) }
        let collection = secret_collection_for_alias_sync(
            service, "default", SECRET_COLLECTION_NONE, deadline.cancellable, &error)
        if let failure = take(&error) {
            if let collection { g_object_unref(collection) }
            throw map(failure, deadline, connecting: true)
        }
        guard let collection else { return nil }
        defer { g_object_unref(collection) }
        return secret_collection_get_locked(collection) != 0
    }

    private static func throwIfLocked(_ deadline: Deadline) throws(KeyringError) {
        if try defaultCollectionLocked(deadline) == true { throw .collectionLocked }
    }

    // MARK: GLib helpers

    /// A new attribute table (keys and values owned by the table).
    private static func attributes(store: String, kind: String?, id: String?) -> OpaquePointer {
        // g_hash_table_new_full aborts on allocation failure rather than returning NULL.
        let table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free)!
        for (key, value) in [("store", store), ("kind", kind), ("id", id)] {
            guard let value else { continue }
            g_hash_table_insert(table, UnsafeMutableRawPointer(g_strdup(key)), UnsafeMutableRawPointer(g_strdup(value)))
        }
        return table
    }

    private static func string(_ table: OpaquePointer, _ key: String) -> String? {
        key.withCString { name in
            g_hash_table_lookup(table, name).map { String(cString: $0.assumingMemoryBound(to: CChar.self)) }
        }
    }

    /// A GError copied out and freed.
    struct Failure {
        let domain: GQuark
        let code: Int32
        let message: String
    }

    private static func take(_ error: inout UnsafeMutablePointer<GError>?) -> Failure? {
        guard let pointer = error else { return nil }
        defer {
            g_error_free(pointer)
            error = nil
        }
        let message = pointer.pointee.message.map { String(cString: $0) } ?? "unknown error"
        return Failure(domain: pointer.pointee.domain, code: pointer.pointee.code, message: message)
    }

    /// Turns a GError into SiteKeep's error. `connecting` marks the calls that only reach the
    /// service, whose failures all mean "no usable Secret Service".
    private static func map(_ failure: Failure, _ deadline: Deadline, connecting: Bool = false) -> KeyringError {
        let io = g_io_error_quark()
        let dbus = g_dbus_error_quark()
        let secret = secret_error_get_quark()
        if failure.domain == io, failure.code == Int32(G_IO_ERROR_CANCELLED.rawValue) {
            return .timeout(seconds: deadline.seconds)
        }
        if failure.domain == io, failure.code == Int32(G_IO_ERROR_TIMED_OUT.rawValue) {
            return .timeout(seconds: deadline.seconds)
        }
        if failure.domain == dbus {
            switch UInt32(bitPattern: failure.code) {
            case G_DBUS_ERROR_NO_REPLY.rawValue, G_DBUS_ERROR_TIMEOUT.rawValue, G_DBUS_ERROR_TIMED_OUT.rawValue:
                return .timeout(seconds: deadline.seconds)
            case G_DBUS_ERROR_SERVICE_UNKNOWN.rawValue, G_DBUS_ERROR_NAME_HAS_NO_OWNER.rawValue,
                 G_DBUS_ERROR_SPAWN_SERVICE_NOT_FOUND.rawValue, G_DBUS_ERROR_SPAWN_EXEC_FAILED.rawValue,
                 G_DBUS_ERROR_SPAWN_CHILD_EXITED.rawValue, G_DBUS_ERROR_SPAWN_FAILED.rawValue,
                 G_DBUS_ERROR_NO_SERVER.rawValue, G_DBUS_ERROR_DISCONNECTED.rawValue:
                return .noSecretService(failure.message)
            case G_DBUS_ERROR_UNKNOWN_OBJECT.rawValue:
                return .backend("the Secret Service has no default collection (\(failure.message)); create a login keyring (for example with seahorse) or use --keyring file")
            default:
                break
            }
        }
        if failure.domain == io || failure.domain == g_spawn_error_quark() || failure.domain == g_spawn_exit_error_quark() {
            // Connecting to the bus failed: no address, no socket, autolaunch impossible.
            return .noSecretService(failure.message)
        }
        if failure.domain == secret, failure.code == Int32(SECRET_ERROR_IS_LOCKED.rawValue) {
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
    let cancellable: UnsafeMutablePointer<GCancellable>
    let seconds: Double
    private let timer: DispatchWorkItem

    init(seconds: Double) {
        self.seconds = seconds
        // g_cancellable_new aborts on allocation failure rather than returning NULL.
        let cancellable = g_cancellable_new()!
        self.cancellable = cancellable
        let box = CancellableBox(cancellable)
        timer = DispatchWorkItem { g_cancellable_cancel(box.pointer) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
    }

    /// Stops the timer (the operation is over).
    func finish() {
        timer.cancel()
    }

    deinit {
        timer.cancel()
        g_object_unref(cancellable)
    }
}

/// Holds one reference to a cancellable for the timer closure, so the timer can fire safely
/// even after the operation is over.
private final class CancellableBox: @unchecked Sendable {
    // @unchecked: immutable pointer to a thread-safe GObject, with its own reference.
    let pointer: UnsafeMutablePointer<GCancellable>
    init(_ pointer: UnsafeMutablePointer<GCancellable>) {
        self.pointer = pointer
        g_object_ref(pointer)
    }
    deinit { g_object_unref(pointer) }
}
