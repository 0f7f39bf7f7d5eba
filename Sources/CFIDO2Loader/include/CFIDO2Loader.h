#pragma once
/* FIDO2 security keys through libfido2 (libfido2.so.1, Debian's libfido2-1), reached through
 * dlopen on first use: a security key is optional hardware, so no SiteKeep executable needs
 * libfido2 to start, and one without it says so in a clear error only when a key is asked for.
 *
 * A key is named by its libfido2 path (a hidraw node, "/dev/hidraw3"), or by
 * "soft:/path/to/unix.socket": a software CTAP2 authenticator behind libfido2's own transport
 * hooks (fido_dev_set_io_functions + fido_dev_set_transport_functions). Each CTAPHID message
 * then crosses that Unix socket as one frame: command (1 byte), length (4 bytes, big-endian),
 * payload. Everything above the carrier (getInfo, CBOR, the PIN protocol, hmac-secret's key
 * agreement and decryption) is libfido2's own code, exactly as with a plugged key.
 *
 * No libfido2 type appears here: the calls take SiteKeep's own structs and report what went
 * wrong as an SK_FIDO2_* kind, with libfido2's code and a message that holds no secret. */
#include <stddef.h>
#include <stdint.h>

/* What went wrong (sk_fido2_status.kind). */
enum {
    SK_FIDO2_OK = 0,
    SK_FIDO2_UNAVAILABLE = 1,      /* libfido2.so.1 is missing or lacks a call */
    SK_FIDO2_NO_DEVICE = 2,        /* nothing answers at the path (unplugged, no socket) */
    SK_FIDO2_PIN_REQUIRED = 3,     /* the key has a PIN and none was given */
    SK_FIDO2_PIN_INVALID = 4,      /* wrong PIN; retries holds the tries left, -1 unknown */
    SK_FIDO2_PIN_BLOCKED = 5,      /* no PIN tries left: the key must be reset */
    SK_FIDO2_PIN_AUTH_BLOCKED = 6, /* too many wrong PINs in a row: unplug and replug the key */
    SK_FIDO2_PIN_NOT_SET = 7,      /* a PIN was given but the key has none */
    SK_FIDO2_PIN_POLICY = 8,       /* the new PIN breaks the key's policy (too short, too long) */
    SK_FIDO2_NO_TOUCH = 9,         /* no touch within the time-out */
    SK_FIDO2_NO_HMAC_SECRET = 10,  /* the key lacks the hmac-secret extension */
    SK_FIDO2_NO_CREDENTIAL = 11,   /* the credential is not on this key */
    SK_FIDO2_MALFORMED = 12,       /* the key's answer was malformed (CBOR, lengths, flags) */
    SK_FIDO2_INVALID_ARGUMENT = 13,
    SK_FIDO2_DENIED = 14,          /* the key refused or the operation was cancelled */
    SK_FIDO2_OTHER = 15,
};

typedef struct {
    int kind;            /* SK_FIDO2_* */
    int code;            /* libfido2's code (FIDO_ERR_*), 0 when not from libfido2 */
    int retries;         /* PIN tries left after SK_FIDO2_PIN_INVALID, -1 when unknown */
    char message[256];   /* why, when kind != SK_FIDO2_OK; never holds a PIN or key bytes */
} sk_fido2_status;

typedef struct {
    char path[256];
    char manufacturer[64];
    char product[64];
} sk_fido2_device;

typedef struct {
    int fido2;            /* speaks CTAP2 (not U2F only) */
    int supports_pin;     /* clientPin is an option of the key */
    int has_pin;          /* a PIN is set */
    int hmac_secret;      /* lists the hmac-secret extension */
    int pin_protocol;     /* the PIN protocol libfido2 will use (2, 1, or 0 for none) */
} sk_fido2_info;

/* The plugged keys libfido2 finds (fido_dev_info_manifest), at most `max`. */
int sk_fido2_list(sk_fido2_device *out, size_t max, size_t *found, sk_fido2_status *status);

/* What the key at `path` is and supports (CTAPHID INIT and authenticatorGetInfo). */
int sk_fido2_get_info(const char *path, int timeout_ms, sk_fido2_info *out, sk_fido2_status *status);

/* Makes a non-resident ES256 credential with hmac-secret for `rp` (touch required; the PIN, a
 * NUL-terminated UTF-8 string or NULL, for user verification). Writes the credential id
 * (at most id_capacity bytes) and the public key as x || y (64 bytes). */
int sk_fido2_make_credential(const char *path, const char *rp, const uint8_t *user_id, size_t user_id_length,
                             const char *pin, int timeout_ms,
                             uint8_t *credential_id, size_t id_capacity, size_t *id_length,
                             uint8_t public_key[64], sk_fido2_status *status);

/* One assertion over the client data hash `cdh` (32 bytes) for `credential_id`, user presence
 * required (a touch), user verification with `pin` when given. With `salt` (32 bytes), asks for
 * hmac-secret and writes its 32 output bytes to `secret` (wiped on failure); a key with a PIN
 * then needs `pin`, unless `without_pin` is set (a PIN-less slot's bytes are the key's output
 * without user verification, whatever PIN the key has now). Writes the raw authenticator data
 * (CBOR wrapping removed) and the DER signature. */
int sk_fido2_assert(const char *path, const char *rp, const uint8_t *credential_id, size_t id_length,
                    const uint8_t cdh[32], const uint8_t *salt, const char *pin, int without_pin, int timeout_ms,
                    uint8_t secret[32],
                    uint8_t *authdata, size_t authdata_capacity, size_t *authdata_length,
                    uint8_t *signature, size_t signature_capacity, size_t *signature_length,
                    sk_fido2_status *status);

/* Whether the key holds `credential_id` for `rp`, asked without user presence or verification
 * (an assertion with up=false and no extension, as pam-u2f and systemd-cryptenroll ask before
 * they ask for a touch): SK_FIDO2_OK when it does, SK_FIDO2_NO_CREDENTIAL when it does not. */
int sk_fido2_holds(const char *path, const char *rp, const uint8_t *credential_id, size_t id_length,
                   int timeout_ms, sk_fido2_status *status);

/* Sets the key's PIN (old_pin NULL) or changes it. */
int sk_fido2_set_pin(const char *path, const char *pin, const char *old_pin, int timeout_ms, sk_fido2_status *status);

/* The PIN tries left. */
int sk_fido2_pin_retries(const char *path, int timeout_ms, int *retries, sk_fido2_status *status);

/* Loads libfido2 (once); SK_FIDO2_OK, or SK_FIDO2_UNAVAILABLE with the reason in `status`. */
int sk_fido2_load(sk_fido2_status *status);
