internal import CZlib

/// zlib-format (RFC 1950) compression, as the sgit format's `sgz1` blobs use it.
public enum Zlib: Sendable {
    /// Compresses with `compress2` at the given level (sgit uses 6).
    public static func compress(_ data: [UInt8], level: Int32 = 6) throws(CryptoError) -> [UInt8] {
        var bound = compressBound(uLong(data.count))
        var out = [UInt8](repeating: 0, count: Int(bound))
        let rc = data.withUnsafeBufferPointer { src in
            compress2(&out, &bound, src.baseAddress ?? UnsafePointer(bitPattern: 1)!, uLong(src.count), level)
        }
        guard rc == Z_OK else { throw .operationFailed("zlib compress2 returned \(rc)") }
        return Array(out.prefix(Int(bound)))
    }

    /// Inflates a complete zlib stream, refusing output beyond `limit` bytes (a bomb guard) and
    /// any trailing bytes after the stream's end.
    /// - Throws: ``CryptoError/decompressionFailed(_:)``.
    public static func decompress(_ data: [UInt8], limit: Int) throws(CryptoError) -> [UInt8] {
        var stream = z_stream()
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw .decompressionFailed("inflateInit failed")
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = data
        let status: Int32 = input.withUnsafeMutableBufferPointer { src in
            stream.next_in = src.baseAddress
            stream.avail_in = uInt(src.count)
            while true {
                let rc: Int32 = chunk.withUnsafeMutableBufferPointer { c in
                    stream.next_out = c.baseAddress
                    stream.avail_out = uInt(c.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                if output.count + produced > limit { return -100 }
                output.append(contentsOf: chunk[0..<produced])
                if rc == Z_STREAM_END { return stream.avail_in == 0 ? Z_OK : -101 }
                if rc != Z_OK { return rc }
                if produced == 0 && stream.avail_in == 0 { return Z_BUF_ERROR }
            }
        }
        switch status {
        case Z_OK: return output
        case -100: throw .decompressionFailed("output exceeds the \(limit)-byte limit")
        case -101: throw .decompressionFailed("trailing bytes after the end of the zlib stream")
        case Z_BUF_ERROR: throw .decompressionFailed("truncated zlib stream")
        default: throw .decompressionFailed("corrupt zlib stream (zlib error \(status))")
        }
    }
}

extension Zlib {
    /// The linked zlib's version.
    public static var versionString: String { String(cString: zlibVersion()) }
}
