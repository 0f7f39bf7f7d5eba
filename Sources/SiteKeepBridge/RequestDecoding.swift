internal import SiteKeepJSON
import SiteKeepBridgeProtocol

extension BridgeRequest {
    /// The id of a request that failed to decode, if one can be read (so the error reply names it).
    static func salvageID(_ value: JSONValue?) -> JSONValue {
        guard let id = value?["id"], isValidID(id) else { return .null }
        return id
    }

    static func isValidID(_ id: JSONValue) -> Bool {
        switch id {
        case .string(let s): s.utf8.count <= 128
        case .int: true
        default: false
        }
    }

    /// Decodes the envelope of a parsed frame.
    /// - Throws: ``BridgeFailure`` with `unknown_field`, `bad_request` or `unsupported_version`.
    static func decode(_ value: JSONValue, supportedVersion: Int) throws(BridgeFailure) -> BridgeRequest {
        guard case .object = value else { throw BridgeFailure(.badRequest, "a request must be a JSON object {v, id, op, args}") }
        do {
            var r = try JSONObjectReader(value, path: "request")
            let idValue = try r.required("id")
            guard isValidID(idValue) else {
                throw BridgeFailure(.badRequest, "request.id must be a string of at most 128 bytes or an integer")
            }
            let v = try r.int("v")
            let op = try r.string("op")
            let args = r.optional("args") ?? .object([])
            guard case .object = args else { throw BridgeFailure(.badRequest, "request.args must be an object") }
            let origin = try r.optionalString("origin")
            try r.finish()
            guard v == Int64(supportedVersion) else {
                throw BridgeFailure(.unsupportedVersion, "protocol version \(v) is not supported; send v: \(supportedVersion)")
            }
            return BridgeRequest(version: v, id: idValue, op: op, args: args, origin: origin)
        } catch let e as JSONShapeError {
            if case .unknownField(let p) = e {
                throw BridgeFailure(.unknownField, "\(FieldSchema.printable(p)) is not a field of a request {v, id, op, args, origin}")
            }
            throw BridgeFailure(.badRequest, e.description)
        } catch let e as BridgeFailure {
            throw e
        } catch {
            throw BridgeFailure(.badRequest, "malformed request")
        }
    }
}
