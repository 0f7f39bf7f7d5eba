/* See CCurlLoader.h. */
#include "CCurlLoader.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The libcurl calls made here, bound with dlsym. The types come from <curl/curl.h>
 * (libcurl4-openssl-dev, for building only); the library is the runtime's libcurl.so.4. */
static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLU *(*url)(void);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
    CURLUcode (*url_get)(const CURLU *, CURLUPart, char **, unsigned int);
    void (*url_cleanup)(CURLU *);
    void (*free)(void *);
    curl_version_info_data *(*version_info)(CURLversion);
    char *(*version)(void);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = "libcurl was not loaded";
static int loaded = 0;

#define BIND(field, symbol) \
    do { \
        *(void **)(&api.field) = dlsym(handle, symbol); \
        if (api.field == NULL) { load_error = "libcurl.so.4 lacks " symbol "; install libcurl4 7.85 or later"; return; } \
    } while (0)

static void load(void) {
    void *handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        load_error = "libcurl.so.4 is not installed; install the libcurl4 package (SiteKeep's HTTP client)";
        return;
    }
    BIND(global_init, "curl_global_init");
    BIND(easy_init, "curl_easy_init");
    BIND(easy_setopt, "curl_easy_setopt");
    BIND(easy_perform, "curl_easy_perform");
    BIND(easy_getinfo, "curl_easy_getinfo");
    BIND(easy_cleanup, "curl_easy_cleanup");
    BIND(easy_reset, "curl_easy_reset");
    BIND(easy_strerror, "curl_easy_strerror");
    BIND(url, "curl_url");
    BIND(url_set, "curl_url_set");
    BIND(url_get, "curl_url_get");
    BIND(url_cleanup, "curl_url_cleanup");
    BIND(free, "curl_free");
    BIND(version_info, "curl_version_info");
    BIND(version, "curl_version");
    curl_version_info_data *info = api.version_info(CURLVERSION_NOW);
    /* CURLOPT_PROTOCOLS_STR and CURLOPT_REDIR_PROTOCOLS_STR came in 7.85.0. */
    if (info == NULL || info->version_num < 0x075500) {
        load_error = "libcurl.so.4 is older than 7.85.0; install a newer libcurl4";
        return;
    }
    if (!(info->features & CURL_VERSION_SSL)) {
        load_error = "libcurl.so.4 was built without TLS; install Debian's libcurl4";
        return;
    }
    if (api.global_init(CURL_GLOBAL_ALL) != CURLE_OK) {
        load_error = "libcurl's global initialisation failed";
        return;
    }
    loaded = 1;
}

const char *sk_http_library_version(void) {
    pthread_once(&once, load);
    return loaded ? api.version() : NULL;
}

/* Easy handles kept between requests: curl_easy_reset forgets every option but keeps the
 * handle's connections, so a clone's many batch requests reuse one TLS connection. */
enum { POOL_SIZE = 8 };
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_SIZE];
static int pooled = 0;

static CURL *take_handle(void) {
    CURL *h = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pooled > 0) h = pool[--pooled];
    pthread_mutex_unlock(&pool_lock);
    if (h != NULL) {
        api.easy_reset(h);
        return h;
    }
    return api.easy_init();
}

static void give_back(CURL *h) {
    pthread_mutex_lock(&pool_lock);
    if (pooled < POOL_SIZE) {
        pool[pooled++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (h != NULL) api.easy_cleanup(h);
}

/* Bounds of the status line and headers, besides max_header_bytes. */
enum { MAX_HEADER_LINE = 8192, MAX_HEADER_LINES = 256 };

typedef struct {
    size_t max_body, max_headers;
    uint8_t *body;
    size_t body_length, body_capacity, received;
    char *headers;                /* max_headers + 1 bytes */
    size_t header_length, header_total, header_lines;
    int stopped;                  /* SK_HTTP_TOO_LARGE or SK_HTTP_HEADERS_TOO_LARGE when a callback stopped the transfer */
} transfer;

/* The body, kept only up to max_body bytes: past it the transfer is stopped (returning less
 * than was handed over makes libcurl end it with CURLE_WRITE_ERROR), whatever the answer
 * declared, chunked or not. */
static size_t on_body(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t n = size * count;
    t->received += n;
    if (n > t->max_body - t->body_length) {
        t->stopped = SK_HTTP_TOO_LARGE;
        return 0;
    }
    if (t->body_length + n > t->body_capacity) {
        size_t want = t->body_capacity < 65536 ? 65536 : t->body_capacity * 2;
        if (want < t->body_length + n) want = t->body_length + n;
        if (want > t->max_body) want = t->max_body;
        uint8_t *grown = realloc(t->body, want);
        if (grown == NULL) return 0;
        t->body = grown;
        t->body_capacity = want;
    }
    memcpy(t->body + t->body_length, data, n);
    t->body_length += n;
    return n;
}

/* One status or header line at a time (libcurl hands over whole lines). Only the last answer's
 * lines are kept (a 100 Continue comes before the real one); all of them count to the bounds. */
static size_t on_header(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t n = size * count;
    t->header_total += n;
    t->header_lines += 1;
    if (n > MAX_HEADER_LINE || t->header_total > t->max_headers || t->header_lines > MAX_HEADER_LINES) {
        t->stopped = SK_HTTP_HEADERS_TOO_LARGE;
        return 0;
    }
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) t->header_length = 0;
    size_t keep = n;
    while (keep > 0 && (data[keep - 1] == '\n' || data[keep - 1] == '\r')) keep--;
    if (keep > 0 && t->header_length + keep + 1 <= t->max_headers) {
        memcpy(t->headers + t->header_length, data, keep);
        t->header_length += keep;
        t->headers[t->header_length++] = '\n';
        t->headers[t->header_length] = 0;
    }
    return n;
}

static int fail(sk_http_answer *a, int error, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(a->message, sizeof a->message, format, args);
    va_end(args);
    a->error = error;
    return error;
}

static int is_loopback(const char *host) {
    return strcasecmp(host, "127.0.0.1") == 0 || strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0;
}

/* Parses the URL as libcurl will use it (the handle gets this very parse, CURLOPT_CURLU, so no
 * second parser can read it differently) and applies the policy: https, or http to loopback;
 * no user information. */
static int check_url(const char *text, CURLU **out, sk_http_answer *a) {
    CURLU *u = api.url();
    if (u == NULL) return fail(a, SK_HTTP_NETWORK, "out of memory");
    char *scheme = NULL, *host = NULL, *user = NULL;
    int rc = SK_HTTP_OK;
    if (api.url_set(u, CURLUPART_URL, text, 0) != CURLUE_OK) {
        rc = fail(a, SK_HTTP_REFUSED, "the URL is malformed or not http(s); give an https:// URL");
    } else if (api.url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK || api.url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        rc = fail(a, SK_HTTP_REFUSED, "the URL has no scheme or host; give an https:// URL");
    } else if (api.url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        rc = fail(a, SK_HTTP_REFUSED, "the URL carries user information (user@host), which is refused; give https://host/...");
    } else if (strcasecmp(scheme, "https") == 0) {
        /* fine */
    } else if (strcasecmp(scheme, "http") == 0) {
        if (!is_loopback(host))
            rc = fail(a, SK_HTTP_REFUSED, "plain http is refused for %.200s; use https (plain http only to loopback: 127.0.0.1, localhost, [::1])", host);
    } else {
        rc = fail(a, SK_HTTP_REFUSED, "the scheme %.20s is refused; use https", scheme);
    }
    if (scheme) api.free(scheme);
    if (host) api.free(host);
    if (user) api.free(user);
    if (rc != SK_HTTP_OK) {
        api.url_cleanup(u);
        return rc;
    }
    *out = u;
    return SK_HTTP_OK;
}

#define SET(option, value) \
    do { \
        CURLcode set_rc = api.easy_setopt(h, option, value); \
        if (set_rc != CURLE_OK) { \
            fail(answer, SK_HTTP_UNAVAILABLE, "libcurl refused the option " #option " (%s); install libcurl4 7.85 or later", api.easy_strerror(set_rc)); \
            goto done; \
        } \
    } while (0)

int sk_http_perform(const sk_http_request *request, sk_http_answer *answer) {
    memset(answer, 0, sizeof *answer);
    pthread_once(&once, load);
    if (!loaded) return fail(answer, SK_HTTP_UNAVAILABLE, "%s", load_error);
    if (request == NULL || request->url == NULL || request->method == NULL || (request->body == NULL && request->body_length > 0) ||
        request->max_body_bytes == 0 || request->max_header_bytes < 256)
        return fail(answer, SK_HTTP_REFUSED, "malformed request");

    const char *m = request->method;
    int is_get = strcmp(m, "GET") == 0, is_post = strcmp(m, "POST") == 0, is_put = strcmp(m, "PUT") == 0, is_delete = strcmp(m, "DELETE") == 0;
    if (!(is_get || is_post || is_put || is_delete)) return fail(answer, SK_HTTP_REFUSED, "the method %.16s is not one SiteKeep sends", m);

    /* Header lines: "Name: value", nothing below a space but a tab (no CR or LF to split them). */
    for (size_t i = 0; i < request->header_count; i++) {
        const char *line = request->headers[i];
        const char *colon = line ? strchr(line, ':') : NULL;
        if (colon == NULL || colon == line) return fail(answer, SK_HTTP_REFUSED, "header %zu is not \"Name: value\"", i + 1);
        for (const char *c = line; *c; c++)
            if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                return fail(answer, SK_HTTP_REFUSED, "header %zu holds a control character (CR, LF, ...); refused", i + 1);
    }

    CURLU *url = NULL;
    if (check_url(request->url, &url, answer) != SK_HTTP_OK) return answer->error;

    transfer t = { .max_body = request->max_body_bytes, .max_headers = request->max_header_bytes };
    t.headers = malloc(t.max_headers + 1);
    /* The caller's lines are linked in place: libcurl reads the list and never frees it. So a
     * credential header stays in the caller's (guarded, wiped) memory; only libcurl's own
     * request buffer copies it while the request is sent. */
    struct curl_slist *lines = calloc(request->header_count + 2, sizeof *lines);
    CURL *h = take_handle();
    char errors[CURL_ERROR_SIZE];
    errors[0] = 0;
    if (t.headers == NULL || lines == NULL || h == NULL) {
        fail(answer, SK_HTTP_NETWORK, "out of memory");
        goto done;
    }
    t.headers[0] = 0;
    for (size_t i = 0; i < request->header_count; i++) {
        lines[i].data = (char *)request->headers[i];
        lines[i].next = &lines[i + 1];
    }
    /* No "Expect: 100-continue" round trip before a large body. */
    size_t n = request->header_count;
    lines[n].data = (char *)"Expect:";
    lines[n].next = NULL;
    /* A body sent without a Content-Type goes without one: libcurl's default for POSTFIELDS is
     * application/x-www-form-urlencoded, which made an S3 server (moto, werkzeug) parse a
     * presigned part upload as a form and stall. */
    int typed = 0;
    for (size_t i = 0; i < request->header_count; i++)
        if (strncasecmp(request->headers[i], "content-type:", 13) == 0) typed = 1;
    if (!typed && (is_post || is_put)) {
        lines[n].next = &lines[n + 1];
        lines[n + 1].data = (char *)"Content-Type:";
        lines[n + 1].next = NULL;
    }

    SET(CURLOPT_CURLU, url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "https");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_MAXREDIRS, 0L);
    SET(CURLOPT_PROXY, "");                 /* no proxy, whatever http_proxy/https_proxy/ALL_PROXY say */
    SET(CURLOPT_NOPROXY, "*");
    SET(CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
    if (request->ca_file != NULL) SET(CURLOPT_CAINFO, request->ca_file);
    SET(CURLOPT_HTTP_CONTENT_DECODING, 0L);
    SET(CURLOPT_CONNECTTIMEOUT_MS, request->connect_timeout_ms > 0 ? request->connect_timeout_ms : 10000L);
    SET(CURLOPT_TIMEOUT_MS, request->total_timeout_ms > 0 ? request->total_timeout_ms : 600000L);
    SET(CURLOPT_LOW_SPEED_LIMIT, 1024L);
    SET(CURLOPT_LOW_SPEED_TIME, request->idle_timeout_ms > 0 ? (request->idle_timeout_ms + 999) / 1000 : 30L);
    SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)request->max_body_bytes);
    SET(CURLOPT_USERAGENT, "SiteKeep");
    SET(CURLOPT_HTTPHEADER, lines);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, &t);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, &t);
    SET(CURLOPT_ERRORBUFFER, errors);
    if (is_get) {
        SET(CURLOPT_HTTPGET, 1L);
    } else if (is_delete) {
        SET(CURLOPT_CUSTOMREQUEST, "DELETE");
    } else {
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_length);
        SET(CURLOPT_POSTFIELDS, request->body_length > 0 ? (const char *)request->body : "");
        if (is_put) SET(CURLOPT_CUSTOMREQUEST, "PUT");
    }

    /* CURLOPT_NOSIGNAL (threads) leaves SIGPIPE to the caller, and a one-shot command does not
     * ignore it: a server that hangs up while a body is sent must be an error, not the end of the
     * process. Blocked on this thread only, one raised meanwhile taken off, the mask restored. */
    sigset_t pipe_only, before;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    int masked = pthread_sigmask(SIG_BLOCK, &pipe_only, &before) == 0;
    CURLcode rc = api.easy_perform(h);
    if (masked) {
        sigset_t pending;
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) && !sigismember(&before, SIGPIPE)) {
            struct timespec now = { 0, 0 };
            sigtimedwait(&pipe_only, NULL, &now);
        }
        pthread_sigmask(SIG_SETMASK, &before, NULL);
    }
    answer->received_bytes = t.received;
    if (t.stopped == SK_HTTP_TOO_LARGE || rc == CURLE_FILESIZE_EXCEEDED) {
        fail(answer, SK_HTTP_TOO_LARGE, "the answer's body is larger than %zu bytes; SiteKeep stopped reading it after %zu", t.max_body, t.received);
    } else if (t.stopped == SK_HTTP_HEADERS_TOO_LARGE) {
        fail(answer, SK_HTTP_HEADERS_TOO_LARGE, "the answer's status line or headers passed their bounds (%zu bytes in all, %d a line, %d lines); SiteKeep stopped reading it",
             t.max_headers, MAX_HEADER_LINE, MAX_HEADER_LINES);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        fail(answer, SK_HTTP_TIMEOUT, "timed out (%s)", errors[0] ? errors : api.easy_strerror(rc));
    } else if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT) {
        fail(answer, SK_HTTP_REFUSED, "refused: %s", errors[0] ? errors : api.easy_strerror(rc));
    } else if (rc != CURLE_OK) {
        fail(answer, SK_HTTP_NETWORK, "%s", errors[0] ? errors : api.easy_strerror(rc));
    } else {
        long status = 0;
        api.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        answer->status = status;
        answer->body = t.body;
        answer->body_length = t.body_length;
        answer->header_block = t.headers;
        answer->header_length = t.header_length;
        t.body = NULL;
        t.headers = NULL;
    }

done:
    if (h != NULL) {
        /* Nothing of this request may outlive it in the handle: the list and URL are freed next. */
        api.easy_setopt(h, CURLOPT_HTTPHEADER, (struct curl_slist *)NULL);
        api.easy_setopt(h, CURLOPT_CURLU, (CURLU *)NULL);
        api.easy_setopt(h, CURLOPT_ERRORBUFFER, (char *)NULL);
        /* A transfer that failed or was stopped mid-body leaves its connection unusable, and
         * curl may keep it open in the handle until the next request: a hostile server would
         * go on streaming into the socket buffers. Cleaning the handle closes it now. */
        if (answer->error == SK_HTTP_OK) give_back(h);
        else api.easy_cleanup(h);
    }
    if (url != NULL) api.url_cleanup(url);
    free(lines);
    free(t.body);
    free(t.headers);
    return answer->error;
}

void sk_http_answer_free(sk_http_answer *answer) {
    if (answer == NULL) return;
    free(answer->body);
    free(answer->header_block);
    answer->body = NULL;
    answer->header_block = NULL;
    answer->body_length = 0;
    answer->header_length = 0;
}
