public import SiteKeepSocket

/// Which processes may bind a socket connection to a site: the site's hosts (the SiteKeep
/// browser, and the executables the user added with `sitekeep site host add`).
///
/// The socket server identifies the connecting process (``PeerProcess``: its executable, read
/// from `/proc` under a pidfd) when it accepts the connection and again at `hello`; the
/// dispatcher asks the authority before it binds the connection. Another program of the same
/// user is refused, so it cannot act for a site, even though it can reach the socket.
public protocol HostAuthority: Sendable {
    /// Nil when `process` may bind a connection to `site`; else why not, in words that name the
    /// process's executable and what the user can do.
    func refusal(of process: PeerProcess, for site: BridgeSite) -> String?
}

/// How a connection's `hello` is checked against the hosts of the site it names.
public struct HostCheck: Sendable {
    private let refusal: @Sendable (BridgeSite) -> String?

    private init(_ refusal: @escaping @Sendable (BridgeSite) -> String?) { self.refusal = refusal }

    /// An in-process connection: the process that made it linked SiteKeep and is its own host.
    public static let inProcess = HostCheck { _ in nil }

    /// A connection the daemon handed to a host it started (``HostChannel``): the capability is
    /// the connection itself, so nothing is looked up about the process that holds it; which
    /// sites it binds is `refusal`'s to say (nil: this one), asked at `hello`, so a host removed
    /// from a site since the launch binds it no more.
    public static func launched(_ refusal: @escaping @Sendable (BridgeSite) -> String?) -> HostCheck {
        HostCheck(refusal)
    }

    /// A socket connection: the process identified when the connection was accepted
    /// (`accepted`) and, at `hello`, again from the socket (`identifyNow`) must both be hosts
    /// of the site, so a process that `execve`s a host after connecting is judged by what it ran
    /// when it connected too. A process that could not be identified is refused.
    public static func socket(accepted: Result<PeerProcess, PeerProcessError>,
                              identifyNow: @escaping @Sendable () -> Result<PeerProcess, PeerProcessError>,
                              authority: any HostAuthority) -> HostCheck {
        HostCheck { site in
            for seen in [accepted, identifyNow()] {
                switch seen {
                case .failure(let e):
                    return "the connecting process could not be identified, so it cannot act for \(site.name): \(e)"
                case .success(let process):
                    if let why = authority.refusal(of: process, for: site) { return why }
                }
            }
            return nil
        }
    }

    /// Nil when the connection may be bound to `site`; else the refusal.
    func refusal(for site: BridgeSite) -> String? { refusal(site) }
}
