@preconcurrency import Glibc
import SiteKeepSoftFIDO2

// sitekeep-soft-fido2 --socket PATH [--no-touch-ms N] [--pin-protocols 2,1] [--no-hmac-secret]
// A software CTAP2 authenticator on a Unix socket, for the tests (never shipped). It prints
// "ready" once it listens, and serves until it is killed.
var socketPath: String?
var noTouch: Int32 = 300
var protocols = [2, 1]
var hmacSecret = true
var args = CommandLine.arguments.dropFirst()
while let a = args.popFirst() {
    switch a {
    case "--socket": socketPath = args.popFirst()
    case "--no-touch-ms": noTouch = Int32(args.popFirst() ?? "") ?? noTouch
    case "--pin-protocols": protocols = (args.popFirst() ?? "").split(separator: ",").compactMap { Int($0) }
    case "--no-hmac-secret": hmacSecret = false
    default:
        fputs("sitekeep-soft-fido2: unknown argument \(a)\n", stderr)
        exit(2)
    }
}
guard let socketPath else {
    fputs("usage: sitekeep-soft-fido2 --socket PATH [--no-touch-ms N] [--pin-protocols 2,1] [--no-hmac-secret]\n", stderr)
    exit(2)
}
setvbuf(stdout, nil, _IOLBF, 0)
// A test runner may start it with signals blocked (posix_spawn keeps the mask): take the default
// actions back, so SIGTERM ends it.
var all = sigset_t()
sigfillset(&all)
sigprocmask(SIG_UNBLOCK, &all, nil)
let server = SoftFIDO2Server(authenticator: SoftAuthenticator(pinProtocols: protocols, noTouchMilliseconds: noTouch, hasHMACSecret: hmacSecret), socketPath: socketPath)
let failure = server.run(ready: { print("ready") })
fputs("sitekeep-soft-fido2: \(failure)\n", stderr)
exit(1)
