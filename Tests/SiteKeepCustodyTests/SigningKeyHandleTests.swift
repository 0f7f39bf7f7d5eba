import Foundation
import Synchronization
import Testing
import SiteKeepCrypto
@testable import SiteKeepCustody

/// A team key signs for several connections at once with no lock (``SharedSigningKey``): every
/// signature made by four threads together verifies, for both algorithms, and exports taken
/// while others sign give the same key back. Under `tools/sanitize` (ThreadSanitizer) this is
/// also the test that would show a data race on the key.
@Suite struct SigningKeyHandleTests {
    @Test(arguments: [SigningAlgorithm.ed25519, .p256])
    func fourThreadsSignWithOneKeyAtOnceAndEverySignatureVerifies(algorithm: SigningAlgorithm) throws {
        let handle: SigningKeyHandle = switch algorithm {
        case .ed25519: SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: SecretBytes(randomCount: 32)))
        case .p256: SigningKeyHandle(p256: try P256.Signing.PrivateKey())
        }
        let bad = Atomic(0), done = Atomic(0), exports = Atomic(0)
        let publicKey = handle.publicKey
        let threads = 4, perThread = 300
        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                for i in 0..<perThread {
                    let message = Array("connection \(t) request \(i)".utf8)
                    guard let signature = try? handle.sign(message),
                          SignatureVerifier.isValid(signature, for: message, publicKey: publicKey, algorithm: algorithm)
                    else { bad.add(1, ordering: .relaxed); continue }
                    done.add(1, ordering: .relaxed)
                    if i % 100 == 0, let wrapped = try? handle.exportForWrapping(),
                       let again = try? SigningKeyHandle.importWrapped(wrapped, algorithm: algorithm),
                       again.publicKey == publicKey {
                        exports.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        group.wait()
        #expect(bad.load(ordering: .relaxed) == 0, "every concurrent signature verifies")
        #expect(done.load(ordering: .relaxed) == threads * perThread)
        #expect(exports.load(ordering: .relaxed) == threads * 3, "exports during signing give the same key back")
    }
}
