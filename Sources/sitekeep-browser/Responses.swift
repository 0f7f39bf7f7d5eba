import CWebKitGTK
import SiteKeepBrowserCore

/// A response policy decision as ``ResponsePolicy`` sees it: whether WebKit can show the type and
/// what its `Content-Disposition` asks for. Every view (a tab's and a prefetch's) decides each
/// frame's response with this and applies the verdict itself, `use` or `ignore`: returning
/// false from `decide-policy` would leave it to WebKit's default, which downloads attachments
/// (into the XDG download folder, or `$HOME`).
@MainActor
enum FrameResponse {
    /// The verdict for the response `decision` (a `WebKitResponsePolicyDecision`) carries.
    static func verdict(_ decision: OpaquePointer) -> ResponseVerdict {
        let response = webkit_response_policy_decision_get_response(decision)
        return ResponsePolicy.verdict(mimeTypeSupported: webkit_response_policy_decision_is_mime_type_supported(decision) != 0,
                                      contentDisposition: takeString(skb_content_disposition(response)))
    }

    /// The address the response answers (nil when WebKit names none).
    static func url(_ decision: OpaquePointer) -> String? {
        string(webkit_uri_request_get_uri(webkit_response_policy_decision_get_request(decision)))
    }

    /// Whether the response is the main frame's document (else an iframe's, of any origin).
    static func isMainFrame(_ decision: OpaquePointer) -> Bool {
        webkit_response_policy_decision_is_main_frame_main_resource(decision) != 0
    }
}
