extension Origin {
    /// The origin of a page's http(s) address, such as WebKit reports for a view or a
    /// navigation: its `scheme://host[:port]` parsed by ``init(parsing:)``, the path, query and
    /// fragment after it ignored.
    ///
    /// Everything ``init(parsing:)`` refuses is refused here (user information, a backslash,
    /// whitespace or a control character before the path, a look-alike host, an IPv4 address
    /// in other than dotted decimal, plain http off loopback, ...), and one thing more: a host
    /// that ends in a dot (``OriginError/hostEndsInDot(_:)``). A page at `https://host./` is
    /// another origin than `https://host/` in the web's rules (its own cookies and storage),
    /// so it is never taken for the site at `host`.
    ///
    /// ```swift
    /// try Origin(ofURL: "https://News.example/a?b#c").serialized   // "https://news.example:443"
    /// try Origin(ofURL: "https://user@news.example/")              // throws .userinfoNotAllowed
    /// try Origin(ofURL: "https://news.example./")                  // throws .hostEndsInDot
    /// ```
    /// - Throws: an ``OriginError`` naming the first problem found.
    public init(ofURL url: String) throws(OriginError) {
        var end = url.endIndex
        var hostEndingInDot: Substring?
        if let colon = url.firstIndex(of: ":"), url[url.index(after: colon)...].hasPrefix("//") {
            let authorityStart = url.index(colon, offsetBy: 3)
            end = url[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
            let authority = url[authorityStart..<end]
            if !authority.hasPrefix("[") {
                let host = authority.lastIndex(of: ":").map { authority[..<$0] } ?? authority
                // The full stops UTS 46 maps to '.' count as one.
                if let last = host.last, [".", "\u{3002}", "\u{FF0E}", "\u{FF61}"].contains(last) { hostEndingInDot = host }
            }
        }
        try self.init(parsing: String(url[..<end]))
        if let hostEndingInDot { throw .hostEndsInDot(String(hostEndingInDot.prefix(253))) }
    }
}
