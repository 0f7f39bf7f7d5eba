import Synchronization

/// The MIME type a new tree entry records (SGIT-FORMAT.md §5.2): what Python's
/// `mimetypes.guess_type(name)` answers on this machine — its built-in table, overlaid by
/// `/etc/mime.types` and the other files Python reads, later files winning — else
/// `application/octet-stream`. Informational only (no merge or integrity decision uses it), but
/// matching it keeps SiteKeep's trees byte-identical to sgit's for the same files.
public enum MimeTypes {
    /// The type recorded for a file called `name` (one path segment).
    public static func guess(fileName name: String) -> String {
        table.withLock { t in
            if t == nil { t = load() }
            return lookup(name, in: t!) ?? "application/octet-stream"
        }
    }

    private static let table = Mutex<[String: String]?>(nil)

    /// Python's lookup: suffix aliases (`.tgz` → `.tar.gz`), one encoding suffix dropped
    /// (`.gz`, `.Z`, `.bz2`, `.xz`, `.br`), then the extension as is, then lower-cased.
    static func lookup(_ name: String, in table: [String: String]) -> String? {
        var (base, ext) = splitExtension(name)
        while let alias = suffixAliases[ext] {
            (base, ext) = splitExtension(base + alias)
        }
        if encodings.contains(ext) { (base, ext) = splitExtension(base) }
        return table[ext] ?? table[ext.lowercased()]
    }

    /// `posixpath.splitext`: the last `.` that is not part of leading dots.
    static func splitExtension(_ name: String) -> (String, String) {
        let u = Array(name.utf8)
        guard let dot = u.lastIndex(of: UInt8(ascii: ".")) else { return (name, "") }
        if u[..<dot].allSatisfy({ $0 == UInt8(ascii: ".") }) { return (name, "") }
        return (String(decoding: u[..<dot], as: UTF8.self), String(decoding: u[dot...], as: UTF8.self))
    }

    static let suffixAliases = [".svgz": ".svg.gz", ".tgz": ".tar.gz", ".taz": ".tar.gz", ".tz": ".tar.gz",
                                ".tbz2": ".tar.bz2", ".txz": ".tar.xz"]
    static let encodings: Set<String> = [".gz", ".Z", ".bz2", ".xz", ".br"]
    static let knownFiles = ["/etc/mime.types", "/etc/httpd/mime.types", "/etc/httpd/conf/mime.types",
                             "/etc/apache/mime.types", "/etc/apache2/mime.types", "/usr/local/etc/httpd/conf/mime.types",
                             "/usr/local/lib/netscape/mime.types", "/usr/local/etc/httpd/conf/mime.types",
                             "/usr/local/etc/mime.types"]

    static func load() -> [String: String] {
        var t: [String: String] = [:]
        for pair in builtIn.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            guard let eq = pair.firstIndex(of: "=") else { continue }
            t["." + pair[..<eq]] = String(pair[pair.index(after: eq)...])
        }
        for file in knownFiles {
            guard case .bytes(let bytes)? = try? FileAccess.read(file, limit: 4 << 20, object: file) else { continue }
            parse(bytes, into: &t)
        }
        return t
    }

    /// One mime.types file: `type ext ext …` per line, `#` starts a comment.
    static func parse(_ bytes: [UInt8], into t: inout [String: String]) {
        for line in bytes.split(separator: 0x0a) {
            let content = line.prefix { $0 != UInt8(ascii: "#") }
            let words = content.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0d || $0 == 0x0b || $0 == 0x0c })
            guard words.count > 1 else { continue }
            let type = String(decoding: words[0], as: UTF8.self)
            for w in words.dropFirst() { t["." + String(decoding: w, as: UTF8.self)] = type }
        }
    }

    /// Python 3.11's `mimetypes._types_map_default` (extension=type).
    static let builtIn = """
        3g2=audio/3gpp2 3gp=audio/3gpp 3gpp=audio/3gpp 3gpp2=audio/3gpp2 a=application/octet-stream
        aac=audio/aac adts=audio/aac ai=application/postscript aif=audio/x-aiff aifc=audio/x-aiff
        aiff=audio/x-aiff ass=audio/aac au=audio/basic avi=video/x-msvideo avif=image/avif bat=text/plain
        bcpio=application/x-bcpio bin=application/octet-stream bmp=image/bmp c=text/plain
        cdf=application/x-netcdf cpio=application/x-cpio csh=application/x-csh css=text/css csv=text/csv
        dll=application/octet-stream doc=application/msword dot=application/msword dvi=application/x-dvi
        eml=message/rfc822 eps=application/postscript etx=text/x-setext exe=application/octet-stream
        gif=image/gif gtar=application/x-gtar h=text/plain h5=application/x-hdf5 hdf=application/x-hdf
        heic=image/heic heif=image/heif htm=text/html html=text/html ico=image/vnd.microsoft.icon
        ief=image/ief jpe=image/jpeg jpeg=image/jpeg jpg=image/jpeg js=application/javascript
        json=application/json ksh=text/plain latex=application/x-latex loas=audio/aac m1v=video/mpeg
        m3u=application/vnd.apple.mpegurl m3u8=application/vnd.apple.mpegurl man=application/x-troff-man
        me=application/x-troff-me mht=message/rfc822 mhtml=message/rfc822 mif=application/x-mif
        mjs=application/javascript mov=video/quicktime movie=video/x-sgi-movie mp2=audio/mpeg
        mp3=audio/mpeg mp4=video/mp4 mpa=video/mpeg mpe=video/mpeg mpeg=video/mpeg mpg=video/mpeg
        ms=application/x-troff-ms n3=text/n3 nc=application/x-netcdf nq=application/n-quads
        nt=application/n-triples nws=message/rfc822 o=application/octet-stream obj=application/octet-stream
        oda=application/oda opus=audio/opus p12=application/x-pkcs12 p7c=application/pkcs7-mime
        pbm=image/x-portable-bitmap pdf=application/pdf pfx=application/x-pkcs12
        pgm=image/x-portable-graymap pl=text/plain png=image/png pnm=image/x-portable-anymap
        pot=application/vnd.ms-powerpoint ppa=application/vnd.ms-powerpoint ppm=image/x-portable-pixmap
        pps=application/vnd.ms-powerpoint ppt=application/vnd.ms-powerpoint ps=application/postscript
        pwz=application/vnd.ms-powerpoint py=text/x-python pyc=application/x-python-code
        pyo=application/x-python-code qt=video/quicktime ra=audio/x-pn-realaudio
        ram=application/x-pn-realaudio ras=image/x-cmu-raster rdf=application/xml rgb=image/x-rgb
        roff=application/x-troff rtx=text/richtext sgm=text/x-sgml sgml=text/x-sgml sh=application/x-sh
        shar=application/x-shar snd=audio/basic so=application/octet-stream src=application/x-wais-source
        srt=text/plain sv4cpio=application/x-sv4cpio sv4crc=application/x-sv4crc svg=image/svg+xml
        swf=application/x-shockwave-flash t=application/x-troff tar=application/x-tar tcl=application/x-tcl
        tex=application/x-tex texi=application/x-texinfo texinfo=application/x-texinfo tif=image/tiff
        tiff=image/tiff tr=application/x-troff trig=application/trig tsv=text/tab-separated-values
        txt=text/plain ustar=application/x-ustar vcf=text/x-vcard vtt=text/vtt wasm=application/wasm
        wav=audio/x-wav webm=video/webm webmanifest=application/manifest+json wiz=application/msword
        wsdl=application/xml xbm=image/x-xbitmap xlb=application/vnd.ms-excel xls=application/vnd.ms-excel
        xml=text/xml xpdl=application/xml xpm=image/x-xpixmap xsl=application/xml xwd=image/x-xwindowdump
        zip=application/zip
        """
}
