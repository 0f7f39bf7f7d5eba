/* See CFIDO2Loader.h. */
#include "CFIDO2Loader.h"

#include <fido.h>
#include <fido/es256.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The libfido2 calls made here, bound with dlsym. Their types are <fido.h>'s own (through
 * __typeof__), so a declaration can never drift from the header the build used; the library is
 * the runtime's libfido2.so.1. */
#define API(name) __typeof__(name) *name
static struct {
    API(fido_init);
    API(fido_strerr);
    API(fido_dev_new);
    API(fido_dev_free);
    API(fido_dev_open);
    API(fido_dev_close);
    API(fido_dev_set_io_functions);
    API(fido_dev_set_transport_functions);
    API(fido_dev_set_timeout);
    API(fido_dev_io_handle);
    API(fido_dev_is_fido2);
    API(fido_dev_has_pin);
    API(fido_dev_supports_pin);
    API(fido_dev_get_cbor_info);
    API(fido_dev_make_cred);
    API(fido_dev_get_assert);
    API(fido_dev_set_pin);
    API(fido_dev_get_retry_count);
    API(fido_dev_info_new);
    API(fido_dev_info_free);
    API(fido_dev_info_manifest);
    API(fido_dev_info_ptr);
    API(fido_dev_info_path);
    API(fido_dev_info_manufacturer_string);
    API(fido_dev_info_product_string);
    API(fido_cbor_info_new);
    API(fido_cbor_info_free);
    API(fido_cbor_info_extensions_ptr);
    API(fido_cbor_info_extensions_len);
    API(fido_cbor_info_protocols_ptr);
    API(fido_cbor_info_protocols_len);
    API(fido_cred_new);
    API(fido_cred_free);
    API(fido_cred_set_type);
    API(fido_cred_set_clientdata_hash);
    API(fido_cred_set_rp);
    API(fido_cred_set_user);
    API(fido_cred_set_extensions);
    API(fido_cred_set_rk);
    API(fido_cred_id_ptr);
    API(fido_cred_id_len);
    API(fido_cred_pubkey_ptr);
    API(fido_cred_pubkey_len);
    API(fido_cred_flags);
    API(fido_assert_new);
    API(fido_assert_free);
    API(fido_assert_set_rp);
    API(fido_assert_set_clientdata_hash);
    API(fido_assert_allow_cred);
    API(fido_assert_set_extensions);
    API(fido_assert_set_hmac_salt);
    API(fido_assert_set_up);
    API(fido_assert_count);
    API(fido_assert_flags);
    API(fido_assert_hmac_secret_ptr);
    API(fido_assert_hmac_secret_len);
    API(fido_assert_authdata_ptr);
    API(fido_assert_authdata_len);
    API(fido_assert_sig_ptr);
    API(fido_assert_sig_len);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = "libfido2 was not loaded";
static int loaded = 0;

#define BIND(name) \
    do { \
        *(void **)(&api.name) = dlsym(handle, #name); \
        if (api.name == NULL) { load_error = "libfido2.so.1 lacks " #name "; install libfido2-1 1.12 or later"; return; } \
    } while (0)

static void load(void) {
    void *handle = dlopen("libfido2.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        load_error = "libfido2.so.1 is not installed; install the libfido2-1 package to use a FIDO2 security key";
        return;
    }
    BIND(fido_init); BIND(fido_strerr);
    BIND(fido_dev_new); BIND(fido_dev_free); BIND(fido_dev_open); BIND(fido_dev_close);
    BIND(fido_dev_set_io_functions); BIND(fido_dev_set_transport_functions); BIND(fido_dev_set_timeout);
    BIND(fido_dev_io_handle); BIND(fido_dev_is_fido2); BIND(fido_dev_has_pin); BIND(fido_dev_supports_pin);
    BIND(fido_dev_get_cbor_info); BIND(fido_dev_make_cred); BIND(fido_dev_get_assert); BIND(fido_dev_set_pin);
    BIND(fido_dev_get_retry_count);
    BIND(fido_dev_info_new); BIND(fido_dev_info_free); BIND(fido_dev_info_manifest); BIND(fido_dev_info_ptr);
    BIND(fido_dev_info_path); BIND(fido_dev_info_manufacturer_string); BIND(fido_dev_info_product_string);
    BIND(fido_cbor_info_new); BIND(fido_cbor_info_free); BIND(fido_cbor_info_extensions_ptr);
    BIND(fido_cbor_info_extensions_len); BIND(fido_cbor_info_protocols_ptr); BIND(fido_cbor_info_protocols_len);
    BIND(fido_cred_new); BIND(fido_cred_free); BIND(fido_cred_set_type); BIND(fido_cred_set_clientdata_hash);
    BIND(fido_cred_set_rp); BIND(fido_cred_set_user); BIND(fido_cred_set_extensions); BIND(fido_cred_set_rk);
    BIND(fido_cred_id_ptr); BIND(fido_cred_id_len); BIND(fido_cred_pubkey_ptr); BIND(fido_cred_pubkey_len);
    BIND(fido_cred_flags);
    BIND(fido_assert_new); BIND(fido_assert_free); BIND(fido_assert_set_rp); BIND(fido_assert_set_clientdata_hash);
    BIND(fido_assert_allow_cred); BIND(fido_assert_set_extensions); BIND(fido_assert_set_hmac_salt);
    BIND(fido_assert_set_up); BIND(fido_assert_count); BIND(fido_assert_flags);
    BIND(fido_assert_hmac_secret_ptr); BIND(fido_assert_hmac_secret_len);
    BIND(fido_assert_authdata_ptr); BIND(fido_assert_authdata_len);
    BIND(fido_assert_sig_ptr); BIND(fido_assert_sig_len);
    const char *debug = getenv("SITEKEEP_FIDO2_DEBUG");
    api.fido_init(debug != NULL && strcmp(debug, "1") == 0 ? FIDO_DEBUG : 0);
    loaded = 1;
}

static int fail(sk_fido2_status *s, int kind, int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(s->message, sizeof s->message, format, args);
    va_end(args);
    s->kind = kind;
    s->code = code;
    return kind;
}

static void clear(sk_fido2_status *s) {
    memset(s, 0, sizeof *s);
    s->retries = -1;
}

int sk_fido2_load(sk_fido2_status *status) {
    clear(status);
    pthread_once(&once, load);
    if (!loaded) return fail(status, SK_FIDO2_UNAVAILABLE, 0, "%s", load_error);
    return SK_FIDO2_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The software authenticator's carrier: one CTAPHID message a frame over a Unix socket.
 * libfido2 calls tx/rx at message level (its HID framing, CIDs and keep-alives are skipped when
 * transport functions are set); read/write are never called then, but fido_dev_set_io_functions
 * wants all four. */

enum { SOFT_HEADER = 5, SOFT_MAX_MESSAGE = 7609 /* CTAPHID's largest message */, CTAPHID_KEEPALIVE = 0x3b };
static const char soft_prefix[] = "soft:";

typedef struct { int fd; } soft_handle;

static void *soft_open(const char *path) {
    if (strncmp(path, soft_prefix, sizeof soft_prefix - 1) != 0) return NULL;
    const char *socket_path = path + sizeof soft_prefix - 1;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(socket_path) >= sizeof addr.sun_path) return NULL;
    strcpy(addr.sun_path, socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return NULL;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return NULL;
    }
    soft_handle *h = calloc(1, sizeof *h);
    if (h == NULL) { close(fd); return NULL; }
    h->fd = fd;
    return h;
}

static void soft_close(void *handle) {
    soft_handle *h = handle;
    if (h == NULL) return;
    close(h->fd);
    free(h);
}

static int soft_read(void *handle, unsigned char *buf, size_t len, int ms) { (void)handle; (void)buf; (void)len; (void)ms; return -1; }
static int soft_write(void *handle, const unsigned char *buf, size_t len) { (void)handle; (void)buf; (void)len; return -1; }

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static long long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Reads exactly n bytes before `deadline` (monotonic ms; -1 none). */
static int read_all(int fd, unsigned char *p, size_t n, long long deadline) {
    while (n > 0) {
        int wait = -1;
        if (deadline >= 0) {
            long long left = deadline - now_ms();
            if (left <= 0) return -1;
            wait = (int)left;
        }
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int r = poll(&pfd, 1, wait);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t got = recv(fd, p, n, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

static int soft_tx(fido_dev_t *dev, uint8_t cmd, const unsigned char *buf, size_t len) {
    soft_handle *h = api.fido_dev_io_handle(dev);
    if (h == NULL || len > SOFT_MAX_MESSAGE || (len > 0 && buf == NULL)) return -1;
    unsigned char header[SOFT_HEADER] = { cmd, (unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8), (unsigned char)len };
    if (write_all(h->fd, header, sizeof header) != 0 || write_all(h->fd, buf, len) != 0) return -1;
    return (int)len;
}

/* One answer to `cmd`: keep-alives are skipped (as libfido2's HID reader does); an answer to
 * another command, an error message or one longer than `len` fails the read. */
static int soft_rx(fido_dev_t *dev, uint8_t cmd, unsigned char *buf, size_t len, int ms) {
    soft_handle *h = api.fido_dev_io_handle(dev);
    if (h == NULL) return -1;
    long long deadline = ms < 0 ? -1 : now_ms() + ms;
    for (;;) {
        unsigned char header[SOFT_HEADER];
        if (read_all(h->fd, header, sizeof header, deadline) != 0) return -1;
        size_t n = (size_t)header[1] << 24 | (size_t)header[2] << 16 | (size_t)header[3] << 8 | header[4];
        if (n > SOFT_MAX_MESSAGE) return -1;
        if (header[0] == CTAPHID_KEEPALIVE) {
            unsigned char skip[SOFT_MAX_MESSAGE];
            if (read_all(h->fd, skip, n, deadline) != 0) return -1;
            continue;
        }
        if (header[0] != cmd || n > len) return -1;
        if (read_all(h->fd, buf, n, deadline) != 0) return -1;
        return (int)n;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Opening a key and mapping libfido2's codes. */

static int classify(int code) {
    switch (code) {
    case FIDO_OK: return SK_FIDO2_OK;
    case FIDO_ERR_PIN_REQUIRED: return SK_FIDO2_PIN_REQUIRED;
    case FIDO_ERR_PIN_INVALID: return SK_FIDO2_PIN_INVALID;
    case FIDO_ERR_PIN_BLOCKED: return SK_FIDO2_PIN_BLOCKED;
    case FIDO_ERR_PIN_AUTH_BLOCKED: return SK_FIDO2_PIN_AUTH_BLOCKED;
    case FIDO_ERR_PIN_NOT_SET: return SK_FIDO2_PIN_NOT_SET;
    case FIDO_ERR_PIN_POLICY_VIOLATION: return SK_FIDO2_PIN_POLICY;
    case FIDO_ERR_USER_ACTION_TIMEOUT: case FIDO_ERR_ACTION_TIMEOUT: case FIDO_ERR_USER_PRESENCE_REQUIRED: return SK_FIDO2_NO_TOUCH;
    case FIDO_ERR_UNSUPPORTED_EXTENSION: return SK_FIDO2_NO_HMAC_SECRET;
    case FIDO_ERR_NO_CREDENTIALS: case FIDO_ERR_INVALID_CREDENTIAL: return SK_FIDO2_NO_CREDENTIAL;
    case FIDO_ERR_RX: case FIDO_ERR_RX_NOT_CBOR: case FIDO_ERR_RX_INVALID_CBOR: case FIDO_ERR_INVALID_CBOR:
    case FIDO_ERR_CBOR_UNEXPECTED_TYPE: case FIDO_ERR_INVALID_SIG: case FIDO_ERR_INVALID_PARAM: return SK_FIDO2_MALFORMED;
    case FIDO_ERR_INVALID_ARGUMENT: return SK_FIDO2_INVALID_ARGUMENT;
    case FIDO_ERR_OPERATION_DENIED: case FIDO_ERR_KEEPALIVE_CANCEL: case FIDO_ERR_NOT_ALLOWED: return SK_FIDO2_DENIED;
    default: return SK_FIDO2_OTHER;
    }
}

/* Opens the key at `path` (a libfido2 path, or soft:SOCKET). */
static fido_dev_t *open_key(const char *path, int timeout_ms, sk_fido2_status *s) {
    if (sk_fido2_load(s) != SK_FIDO2_OK) return NULL;
    if (path == NULL || *path == 0) { fail(s, SK_FIDO2_INVALID_ARGUMENT, 0, "no security key path given"); return NULL; }
    fido_dev_t *dev = api.fido_dev_new();
    if (dev == NULL) { fail(s, SK_FIDO2_OTHER, FIDO_ERR_INTERNAL, "out of memory"); return NULL; }
    int rc = FIDO_OK;
    if (strncmp(path, soft_prefix, sizeof soft_prefix - 1) == 0) {
        static const fido_dev_io_t io = { soft_open, soft_close, soft_read, soft_write };
        static const fido_dev_transport_t transport = { soft_rx, soft_tx };
        if ((rc = api.fido_dev_set_io_functions(dev, &io)) == FIDO_OK)
            rc = api.fido_dev_set_transport_functions(dev, &transport);
    }
    if (rc == FIDO_OK) rc = api.fido_dev_set_timeout(dev, timeout_ms);
    if (rc == FIDO_OK) rc = api.fido_dev_open(dev, path);
    if (rc != FIDO_OK) {
        api.fido_dev_free(&dev);
        fail(s, SK_FIDO2_NO_DEVICE, rc, "no security key answers at %.180s (%s); is it plugged in?", path, api.fido_strerr(rc));
        return NULL;
    }
    return dev;
}

static void close_key(fido_dev_t **dev) {
    if (*dev == NULL) return;
    api.fido_dev_close(*dev);
    api.fido_dev_free(dev);
}

static int key_info(fido_dev_t *dev, sk_fido2_info *out, sk_fido2_status *s) {
    memset(out, 0, sizeof *out);
    out->fido2 = api.fido_dev_is_fido2(dev);
    out->supports_pin = api.fido_dev_supports_pin(dev);
    out->has_pin = api.fido_dev_has_pin(dev);
    if (!out->fido2) return SK_FIDO2_OK;
    fido_cbor_info_t *ci = api.fido_cbor_info_new();
    if (ci == NULL) return fail(s, SK_FIDO2_OTHER, FIDO_ERR_INTERNAL, "out of memory");
    int rc = api.fido_dev_get_cbor_info(dev, ci);
    if (rc != FIDO_OK) {
        api.fido_cbor_info_free(&ci);
        return fail(s, classify(rc) == SK_FIDO2_OTHER ? SK_FIDO2_MALFORMED : classify(rc), rc,
                    "the security key's authenticatorGetInfo failed (%s)", api.fido_strerr(rc));
    }
    char **ext = api.fido_cbor_info_extensions_ptr(ci);
    for (size_t i = 0; i < api.fido_cbor_info_extensions_len(ci); i++)
        if (ext[i] != NULL && strcmp(ext[i], "hmac-secret") == 0) out->hmac_secret = 1;
    const uint8_t *prot = api.fido_cbor_info_protocols_ptr(ci);
    for (size_t i = 0; i < api.fido_cbor_info_protocols_len(ci); i++)
        if ((prot[i] == 1 || prot[i] == 2) && prot[i] > out->pin_protocol) out->pin_protocol = prot[i];
    api.fido_cbor_info_free(&ci);
    return SK_FIDO2_OK;
}

int sk_fido2_list(sk_fido2_device *out, size_t max, size_t *found, sk_fido2_status *s) {
    *found = 0;
    if (sk_fido2_load(s) != SK_FIDO2_OK) return s->kind;
    if (max == 0) return SK_FIDO2_OK;
    fido_dev_info_t *list = api.fido_dev_info_new(max);
    if (list == NULL) return fail(s, SK_FIDO2_OTHER, FIDO_ERR_INTERNAL, "out of memory");
    size_t n = 0;
    int rc = api.fido_dev_info_manifest(list, max, &n);
    if (rc != FIDO_OK) {
        api.fido_dev_info_free(&list, max);
        return fail(s, SK_FIDO2_OTHER, rc, "listing security keys failed (%s)", api.fido_strerr(rc));
    }
    for (size_t i = 0; i < n && i < max; i++) {
        const fido_dev_info_t *d = api.fido_dev_info_ptr(list, i);
        const char *path = api.fido_dev_info_path(d), *m = api.fido_dev_info_manufacturer_string(d), *p = api.fido_dev_info_product_string(d);
        snprintf(out[i].path, sizeof out[i].path, "%s", path ? path : "");
        snprintf(out[i].manufacturer, sizeof out[i].manufacturer, "%s", m ? m : "");
        snprintf(out[i].product, sizeof out[i].product, "%s", p ? p : "");
    }
    *found = n < max ? n : max;
    api.fido_dev_info_free(&list, max);
    return SK_FIDO2_OK;
}

int sk_fido2_get_info(const char *path, int timeout_ms, sk_fido2_info *out, sk_fido2_status *s) {
    fido_dev_t *dev = open_key(path, timeout_ms, s);
    if (dev == NULL) return s->kind;
    int rc = key_info(dev, out, s);
    close_key(&dev);
    return rc;
}

/* The PIN rules a call checks before it talks to the key: hmac-secret present; a PIN given
 * exactly when one is set (a key with a PIN gives different hmac-secret bytes without it),
 * unless the caller asks, with `without_pin`, for the bytes without user verification. */
static int check_key(fido_dev_t *dev, const char *pin, int need_hmac_secret, int without_pin, sk_fido2_status *s) {
    sk_fido2_info info;
    if (key_info(dev, &info, s) != SK_FIDO2_OK) return s->kind;
    if (!info.fido2) return fail(s, SK_FIDO2_NO_HMAC_SECRET, 0, "the security key speaks U2F only (no FIDO2), so it has no hmac-secret");
    if (!need_hmac_secret) return SK_FIDO2_OK;
    if (!info.hmac_secret) return fail(s, SK_FIDO2_NO_HMAC_SECRET, 0, "the security key lacks the hmac-secret extension");
    if (info.has_pin && pin == NULL && !without_pin) return fail(s, SK_FIDO2_PIN_REQUIRED, FIDO_ERR_PIN_REQUIRED, "the security key has a PIN; give it");
    if (!info.has_pin && pin != NULL) return fail(s, SK_FIDO2_PIN_NOT_SET, FIDO_ERR_PIN_NOT_SET, "a PIN was given but the security key has none");
    return SK_FIDO2_OK;
}

/* A failed call's status; after a wrong PIN, the tries left (authenticatorClientPIN getRetries). */
static int call_failed(fido_dev_t *dev, int rc, const char *what, long long started, int timeout_ms, sk_fido2_status *s) {
    int kind = classify(rc);
    /* A transport read that ran out the whole time-out is a touch that never came. */
    if (rc == FIDO_ERR_RX && timeout_ms >= 0 && now_ms() - started >= timeout_ms - 50) kind = SK_FIDO2_NO_TOUCH;
    if (kind == SK_FIDO2_PIN_INVALID) {
        int retries = -1;
        if (api.fido_dev_get_retry_count(dev, &retries) == FIDO_OK) s->retries = retries;
    }
    switch (kind) {
    case SK_FIDO2_NO_TOUCH: return fail(s, kind, rc, "%s: the security key was not touched in time", what);
    case SK_FIDO2_PIN_INVALID: return fail(s, kind, rc, "%s: wrong PIN", what);
    case SK_FIDO2_PIN_BLOCKED: return fail(s, kind, rc, "%s: the security key's PIN is blocked (no tries left); only a reset of the key clears it", what);
    case SK_FIDO2_PIN_AUTH_BLOCKED: return fail(s, kind, rc, "%s: too many wrong PINs in a row; unplug the security key and plug it in again", what);
    case SK_FIDO2_NO_CREDENTIAL: return fail(s, kind, rc, "%s: the credential is not on this security key", what);
    default: return fail(s, kind, rc, "%s: %s", what, api.fido_strerr(rc));
    }
}

int sk_fido2_make_credential(const char *path, const char *rp, const uint8_t *user_id, size_t user_id_length,
                             const char *pin, int timeout_ms,
                             uint8_t *credential_id, size_t id_capacity, size_t *id_length,
                             uint8_t public_key[64], sk_fido2_status *s) {
    *id_length = 0;
    if (rp == NULL || user_id == NULL || user_id_length == 0 || user_id_length > 64)
        return fail(s, SK_FIDO2_INVALID_ARGUMENT, 0, "a relying party id and a user id of 1 to 64 bytes are needed");
    fido_dev_t *dev = open_key(path, timeout_ms, s);
    if (dev == NULL) return s->kind;
    fido_cred_t *cred = NULL;
    if (check_key(dev, pin, 1, 0, s) != SK_FIDO2_OK) goto done;
    if ((cred = api.fido_cred_new()) == NULL) { fail(s, SK_FIDO2_OTHER, FIDO_ERR_INTERNAL, "out of memory"); goto done; }
    /* The client data hash of a credential made outside a browser: random, as fido2-cred uses. */
    unsigned char cdh[32];
    {
        FILE *r = fopen("/dev/urandom", "re");
        size_t got = r ? fread(cdh, 1, sizeof cdh, r) : 0;
        if (r) fclose(r);
        if (got != sizeof cdh) { fail(s, SK_FIDO2_OTHER, 0, "no random bytes from /dev/urandom"); goto done; }
    }
    int rc;
    if ((rc = api.fido_cred_set_type(cred, COSE_ES256)) != FIDO_OK ||
        (rc = api.fido_cred_set_clientdata_hash(cred, cdh, sizeof cdh)) != FIDO_OK ||
        (rc = api.fido_cred_set_rp(cred, rp, NULL)) != FIDO_OK ||
        (rc = api.fido_cred_set_user(cred, user_id, user_id_length, "sitekeep", "SiteKeep", NULL)) != FIDO_OK ||
        (rc = api.fido_cred_set_extensions(cred, FIDO_EXT_HMAC_SECRET)) != FIDO_OK ||
        (rc = api.fido_cred_set_rk(cred, FIDO_OPT_FALSE)) != FIDO_OK) {
        fail(s, SK_FIDO2_INVALID_ARGUMENT, rc, "the credential's parameters were refused (%s)", api.fido_strerr(rc));
        goto done;
    }
    long long started = now_ms();
    rc = api.fido_dev_make_cred(dev, cred, pin);
    if (rc != FIDO_OK) { call_failed(dev, rc, "making the credential", started, timeout_ms, s); goto done; }
    size_t n = api.fido_cred_id_len(cred), k = api.fido_cred_pubkey_len(cred);
    uint8_t flags = api.fido_cred_flags(cred);
    if (n == 0 || n > id_capacity || api.fido_cred_id_ptr(cred) == NULL) {
        fail(s, SK_FIDO2_MALFORMED, 0, "the security key returned a credential id of %zu bytes (1 to %zu expected)", n, id_capacity);
    } else if (k != 64 || api.fido_cred_pubkey_ptr(cred) == NULL) {
        fail(s, SK_FIDO2_MALFORMED, 0, "the security key returned a public key of %zu bytes (an ES256 x || y of 64 expected)", k);
    } else if (!(flags & 0x01)) {
        fail(s, SK_FIDO2_MALFORMED, 0, "the security key made the credential without user presence");
    } else if (!(flags & 0x80)) {
        fail(s, SK_FIDO2_NO_HMAC_SECRET, 0, "the security key made the credential without the hmac-secret extension");
    } else if (pin != NULL && !(flags & 0x04)) {
        fail(s, SK_FIDO2_MALFORMED, 0, "the security key did not verify the user though a PIN was given");
    } else {
        memcpy(credential_id, api.fido_cred_id_ptr(cred), n);
        memcpy(public_key, api.fido_cred_pubkey_ptr(cred), 64);
        *id_length = n;
    }
done:
    if (cred != NULL) api.fido_cred_free(&cred);
    close_key(&dev);
    return s->kind;
}

/* The authenticator data inside libfido2's CBOR byte string (fido_assert_authdata_ptr keeps the
 * CBOR wrapping; 1.12 has no raw accessor). */
static int unwrap_authdata(const uint8_t *p, size_t n, const uint8_t **raw, size_t *raw_length) {
    if (n < 1 || (p[0] & 0xe0) != 0x40) return -1;
    size_t info = p[0] & 0x1f, header, length;
    if (info < 24) { header = 1; length = info; }
    else if (info == 24 && n >= 2) { header = 2; length = p[1]; }
    else if (info == 25 && n >= 3) { header = 3; length = (size_t)p[1] << 8 | p[2]; }
    else return -1;
    if (header + length != n) return -1;
    *raw = p + header;
    *raw_length = length;
    return 0;
}

int sk_fido2_assert(const char *path, const char *rp, const uint8_t *credential_id, size_t id_length,
                    const uint8_t cdh[32], const uint8_t *salt, const char *pin, int without_pin, int timeout_ms,
                    uint8_t secret[32],
                    uint8_t *authdata, size_t authdata_capacity, size_t *authdata_length,
                    uint8_t *signature, size_t signature_capacity, size_t *signature_length,
                    sk_fido2_status *s) {
    *authdata_length = 0;
    *signature_length = 0;
    if (secret != NULL) memset(secret, 0, 32);
    if (rp == NULL || credential_id == NULL || id_length == 0 || cdh == NULL)
        return fail(s, SK_FIDO2_INVALID_ARGUMENT, 0, "a relying party id, a credential id and a client data hash are needed");
    if (without_pin && pin != NULL) return fail(s, SK_FIDO2_INVALID_ARGUMENT, 0, "a PIN was given for an assertion asked without one");
    fido_dev_t *dev = open_key(path, timeout_ms, s);
    if (dev == NULL) return s->kind;
    fido_assert_t *a = NULL;
    /* A touch alone (no salt) is presence, not verification: a key's PIN is not asked for it. */
    if (check_key(dev, pin, salt != NULL, without_pin, s) != SK_FIDO2_OK) goto done;
    if ((a = api.fido_assert_new()) == NULL) { fail(s, SK_FIDO2_OTHER, FIDO_ERR_INTERNAL, "out of memory"); goto done; }
    int rc;
    if ((rc = api.fido_assert_set_rp(a, rp)) != FIDO_OK ||
        (rc = api.fido_assert_set_clientdata_hash(a, cdh, 32)) != FIDO_OK ||
        (rc = api.fido_assert_allow_cred(a, credential_id, id_length)) != FIDO_OK ||
        (rc = api.fido_assert_set_up(a, FIDO_OPT_TRUE)) != FIDO_OK ||
        (salt != NULL && (rc = api.fido_assert_set_extensions(a, FIDO_EXT_HMAC_SECRET)) != FIDO_OK) ||
        (salt != NULL && (rc = api.fido_assert_set_hmac_salt(a, salt, 32)) != FIDO_OK)) {
        fail(s, SK_FIDO2_INVALID_ARGUMENT, rc, "the assertion's parameters were refused (%s)", api.fido_strerr(rc));
        goto done;
    }
    long long started = now_ms();
    rc = api.fido_dev_get_assert(dev, a, pin);
    if (rc != FIDO_OK) { call_failed(dev, rc, salt != NULL ? "asking for hmac-secret" : "asking for a touch", started, timeout_ms, s); goto done; }
    if (api.fido_assert_count(a) != 1) { fail(s, SK_FIDO2_MALFORMED, 0, "the security key returned %zu assertions (1 expected)", api.fido_assert_count(a)); goto done; }
    uint8_t flags = api.fido_assert_flags(a, 0);
    if (!(flags & 0x01)) { fail(s, SK_FIDO2_NO_TOUCH, 0, "the security key answered without user presence (no touch)"); goto done; }
    if (pin != NULL && !(flags & 0x04)) { fail(s, SK_FIDO2_MALFORMED, 0, "the security key did not verify the user though a PIN was given"); goto done; }
    const uint8_t *raw = NULL;
    size_t raw_length = 0;
    if (unwrap_authdata(api.fido_assert_authdata_ptr(a, 0), api.fido_assert_authdata_len(a, 0), &raw, &raw_length) != 0 ||
        raw_length < 37 || raw_length > authdata_capacity) {
        fail(s, SK_FIDO2_MALFORMED, 0, "the security key's authenticator data is malformed");
        goto done;
    }
    size_t sig_length = api.fido_assert_sig_len(a, 0);
    if (sig_length == 0 || sig_length > signature_capacity || api.fido_assert_sig_ptr(a, 0) == NULL) {
        fail(s, SK_FIDO2_MALFORMED, 0, "the security key's signature has %zu bytes", sig_length);
        goto done;
    }
    if (salt != NULL) {
        size_t n = api.fido_assert_hmac_secret_len(a, 0);
        const uint8_t *p = api.fido_assert_hmac_secret_ptr(a, 0);
        if (n != 32 || p == NULL) {
            fail(s, n == 0 ? SK_FIDO2_NO_HMAC_SECRET : SK_FIDO2_MALFORMED, 0,
                 n == 0 ? "the security key returned no hmac-secret output" : "the security key's hmac-secret output has %zu bytes (32 expected)", n);
            goto done;
        }
        memcpy(secret, p, 32);
    }
    memcpy(authdata, raw, raw_length);
    *authdata_length = raw_length;
    memcpy(signature, api.fido_assert_sig_ptr(a, 0), sig_length);
    *signature_length = sig_length;
done:
    /* fido_assert_free wipes the hmac-secret output it held (freezero). */
    if (a != NULL) api.fido_assert_free(&a);
    close_key(&dev);
    return s->kind;
}

int sk_fido2_holds(const char *path, const char *rp, const uint8_t *credential_id, size_t id_length,
                   int timeout_ms, sk_fido2_status *s) {
    if (rp == NULL || credential_id == NULL || id_length == 0)
        return fail(s, SK_FIDO2_INVALID_ARGUMENT, 0, "a relying party id and a credential id are needed");
    fido_dev_t *dev = open_key(path, timeout_ms, s);
    if (dev == NULL) return s->kind;
    fido_assert_t *a = NULL;
    uint8_t cdh[32] = {0};
    if (check_key(dev, NULL, 0, 0, s) != SK_FIDO2_OK) goto done;
    if ((a = api.fido_assert_new()) == NULL) { fail(s, SK_FIDO2_OTHER, FIDO_ERR_INTERNAL, "out of memory"); goto done; }
    int rc;
    if ((rc = api.fido_assert_set_rp(a, rp)) != FIDO_OK ||
        (rc = api.fido_assert_set_clientdata_hash(a, cdh, sizeof cdh)) != FIDO_OK ||
        (rc = api.fido_assert_allow_cred(a, credential_id, id_length)) != FIDO_OK ||
        (rc = api.fido_assert_set_up(a, FIDO_OPT_FALSE)) != FIDO_OK) {
        fail(s, SK_FIDO2_INVALID_ARGUMENT, rc, "the assertion's parameters were refused (%s)", api.fido_strerr(rc));
        goto done;
    }
    long long started = now_ms();
    rc = api.fido_dev_get_assert(dev, a, NULL);
    if (rc != FIDO_OK) { call_failed(dev, rc, "looking for the credential", started, timeout_ms, s); goto done; }
    s->kind = SK_FIDO2_OK;
done:
    if (a != NULL) api.fido_assert_free(&a);
    close_key(&dev);
    return s->kind;
}

int sk_fido2_set_pin(const char *path, const char *pin, const char *old_pin, int timeout_ms, sk_fido2_status *s) {
    if (pin == NULL) return fail(s, SK_FIDO2_INVALID_ARGUMENT, 0, "no PIN given");
    fido_dev_t *dev = open_key(path, timeout_ms, s);
    if (dev == NULL) return s->kind;
    long long started = now_ms();
    int rc = api.fido_dev_set_pin(dev, pin, old_pin);
    if (rc != FIDO_OK) call_failed(dev, rc, old_pin ? "changing the PIN" : "setting the PIN", started, -1, s);
    close_key(&dev);
    return s->kind;
}

int sk_fido2_pin_retries(const char *path, int timeout_ms, int *retries, sk_fido2_status *s) {
    *retries = -1;
    fido_dev_t *dev = open_key(path, timeout_ms, s);
    if (dev == NULL) return s->kind;
    int rc = api.fido_dev_get_retry_count(dev, retries);
    if (rc != FIDO_OK) call_failed(dev, rc, "reading the PIN tries left", now_ms(), -1, s);
    close_key(&dev);
    return s->kind;
}
