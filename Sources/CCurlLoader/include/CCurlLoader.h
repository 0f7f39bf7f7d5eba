#pragma once
/* SiteKeep's one HTTP client: libcurl (libcurl.so.4, Debian's libcurl4, OpenSSL flavour), reached
 * through dlopen on the first request, so that no SiteKeep executable maps libcurl and the ~30
 * libraries it links (nghttp2, GnuTLS for librtmp, Kerberos, LDAP, ...) at start-up: most
 * commands never talk HTTP, and start-up is most of a short command's time.
 *
 * Why libcurl: one client for the vault remotes and the agenda fetch (it was URLSession in a
 * dlopened Swift library, and a `curl` child process); a write callback that stops a body at a
 * byte bound while it streams (URLSession hands over the whole body; curl's --max-filesize
 * trusts a declared length only); no redirects followed; its TLS is the tested one every Debian
 * already ships.
 *
 * No curl type appears here: the request and the answer are SiteKeep's own structs, and the
 * whole transfer (policy, bounds, timeouts) is set in loader.c, so no caller can forget one. */
#include <stddef.h>
#include <stdint.h>

/* What went wrong when no usable answer came back (sk_http_answer.error). */
enum {
    SK_HTTP_OK = 0,
    SK_HTTP_UNAVAILABLE = 1,     /* libcurl.so.4 is missing or too old */
    SK_HTTP_REFUSED = 2,         /* the URL or a header was refused before anything was sent */
    SK_HTTP_TOO_LARGE = 3,       /* the body passed max_body_bytes; the transfer was stopped */
    SK_HTTP_HEADERS_TOO_LARGE = 4, /* the status line or headers passed their bounds */
    SK_HTTP_TIMEOUT = 5,         /* connect, idle or total time-out */
    SK_HTTP_NETWORK = 6,         /* refused, reset, DNS, TLS, a truncated answer */
};

typedef struct {
    const char *method;               /* "GET", "POST" or "PUT" */
    const char *url;                  /* https://..., or http:// to a loopback host only */
    const char *const *headers;       /* "Name: value" lines, NUL-terminated; read in place, never copied here */
    size_t header_count;
    const uint8_t *body;              /* may be NULL when body_length is 0 */
    size_t body_length;
    long connect_timeout_ms;          /* TCP and TLS set-up */
    long idle_timeout_ms;             /* fails when under 1 KiB/s for this long (a stalled or dripping server) */
    long total_timeout_ms;            /* the whole exchange */
    size_t max_body_bytes;            /* the answer's body; the transfer stops past it */
    size_t max_header_bytes;          /* status line and headers of all answers together */
    const char *ca_file;              /* NULL: the system's CA store */
} sk_http_request;

typedef struct {
    long status;                      /* the final answer's status, 0 without one */
    uint8_t *body;                    /* malloc'd, body_length bytes (NULL when empty) */
    size_t body_length;
    char *header_block;               /* the final answer's header lines, each ending in "\n", NUL-terminated */
    size_t header_length;
    int error;                        /* SK_HTTP_* */
    size_t received_bytes;            /* body bytes received before the transfer ended or was stopped */
    char message[512];                /* why, when error != SK_HTTP_OK */
} sk_http_answer;

/* Performs one request. Never follows a redirect (a 3xx is returned as the answer); refuses,
 * before connecting, any scheme but https and http to a host other than 127.0.0.1, localhost or
 * [::1] (as libcurl itself parses the URL); uses no proxy (proxy variables are ignored); sends no
 * Accept-Encoding (the body bound is the bytes on the wire). Returns `answer->error`. The answer
 * must be released with sk_http_answer_free, whatever the result. Thread-safe. */
int sk_http_perform(const sk_http_request *request, sk_http_answer *answer);

/* Wipes and frees what sk_http_perform allocated in `answer`. */
void sk_http_answer_free(sk_http_answer *answer);

/* libcurl's version text ("libcurl/7.88.1 OpenSSL/3.0.x ..."), or NULL when it does not load. */
const char *sk_http_library_version(void);
