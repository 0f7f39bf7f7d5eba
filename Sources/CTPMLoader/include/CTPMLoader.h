#pragma once
/* SiteKeep's TPM 2.0 calls: tpm2-tss's ESAPI (libtss2-esys.so.0, with libtss2-tctildr.so.0,
 * libtss2-mu.so.0 and libtss2-rc.so.0), reached through dlopen on first use, so SiteKeep runs
 * on machines without tpm2-tss (a TPM is optional hardware) and only a TPM slot asks for it.
 *
 * No tss2 type appears here: the whole ESAPI sequence of each operation (the primary key, the
 * sessions, the policy) is in loader.c, and this header speaks bytes. Secrets (the sealed
 * bytes, the authorization value) are copied into the TPM2B structures on the stack and wiped
 * with explicit_bzero before each call returns; the TPM's answer is wiped before it is freed. */
#include <stddef.h>
#include <stdint.h>

/* What an operation came to (sk_tpm_status.code). */
enum {
    SK_TPM_OK = 0,
    SK_TPM_NO_LIBRARY = 1,   /* libtss2 is not installed (message: which library) */
    SK_TPM_NO_DEVICE = 2,    /* the TCTI's device does not exist (message: the path) */
    SK_TPM_NO_ACCESS = 3,    /* the device exists but this user may not open it (message: the path) */
    SK_TPM_UNREACHABLE = 4,  /* the TCTI could not be set up (a socket refused, a bad config) */
    SK_TPM_AUTH_FAIL = 5,    /* the authorization value was wrong (counted by the TPM's DA logic) */
    SK_TPM_LOCKOUT = 6,      /* the TPM is in dictionary-attack lock-out */
    SK_TPM_POLICY_FAIL = 7,  /* the object's policy failed (PCRs no longer match) */
    SK_TPM_BAD_BLOB = 8,     /* the sealed object's blobs do not parse or do not load */
    SK_TPM_FAILED = 9,       /* any other TPM or TSS error (message: tss2-rc's text) */
};

typedef struct {
    int code;
    uint32_t rc;             /* the TSS2_RC, when one was returned */
    char message[256];       /* never a secret */
} sk_tpm_status;

/* An open connection (a TCTI and an ESAPI context). */
typedef struct sk_tpm sk_tpm;

/* Loads libtss2 once; 0 when usable, else SK_TPM_NO_LIBRARY with status->message set. */
int sk_tpm_load(sk_tpm_status *status);

/* Opens the TCTI `conf` ("device:/dev/tpmrm0", "swtpm:host=127.0.0.1,port=2321", ...; NULL or
 * empty: device:/dev/tpmrm0). A device TCTI's path is checked first, so a missing device and
 * one this user may not open are told apart. NULL on failure, with status set. */
sk_tpm *sk_tpm_open(const char *conf, sk_tpm_status *status);
void sk_tpm_close(sk_tpm *tpm);

/* Seals `secret` (1...128 bytes) as a KEYEDHASH sealed-data object under the owner
 * hierarchy's ECC P-256 storage primary (the TCG SRK template, recreated each time), with
 * userAuth `auth` (0...32 bytes; empty: no PIN, and the object is then not subject to the DA
 * lock-out) and, when `pcr_mask` is not 0, a policy on those SHA-256 PCRs' current values
 * (bit n: PCR n, n < 24), combined with PolicyAuthValue when there is an auth. Writes the
 * marshalled TPM2B_PUBLIC and TPM2B_PRIVATE; their lengths in *public_length, *private_length
 * (capacities on input). Sessions are salted by the primary and encrypt the sensitive data. */
int sk_tpm_seal(sk_tpm *tpm, const uint8_t *secret, size_t secret_length, const uint8_t *auth, size_t auth_length,
                uint32_t pcr_mask, uint8_t *public_blob, size_t *public_length, uint8_t *private_blob, size_t *private_length,
                sk_tpm_status *status);

/* Loads the blobs under the recreated primary and unseals with `auth` (and the PCR policy when
 * `pcr_mask` is not 0), through a salted session that encrypts the answer. Writes at most
 * `capacity` bytes to `out` and their count to *out_length. */
int sk_tpm_unseal(sk_tpm *tpm, const uint8_t *public_blob, size_t public_length, const uint8_t *private_blob, size_t private_length,
                  const uint8_t *auth, size_t auth_length, uint32_t pcr_mask, uint8_t *out, size_t capacity, size_t *out_length,
                  sk_tpm_status *status);

/* The dictionary-attack state (TPM2_GetCapability, TPM_PT_LOCKOUT_* and TPMA_PERMANENT). */
typedef struct {
    uint32_t failed_tries;       /* TPM_PT_LOCKOUT_COUNTER */
    uint32_t max_tries;          /* TPM_PT_MAX_AUTH_FAIL */
    uint32_t recovery_seconds;   /* TPM_PT_LOCKOUT_INTERVAL: one failure forgotten per interval */
    uint32_t lockout_recovery_seconds; /* TPM_PT_LOCKOUT_RECOVERY: after a failed lockout auth */
    int in_lockout;              /* TPMA_PERMANENT_INLOCKOUT */
} sk_tpm_lockout;

int sk_tpm_lockout_state(sk_tpm *tpm, sk_tpm_lockout *out, sk_tpm_status *status);

/* Sets the DA parameters with the (empty) lockout authorization: for tests on a software TPM. */
int sk_tpm_set_dictionary_attack_parameters(sk_tpm *tpm, uint32_t max_tries, uint32_t recovery_seconds,
                                            uint32_t lockout_recovery_seconds, sk_tpm_status *status);
/* Clears the DA counter with the (empty) lockout authorization: for tests. */
int sk_tpm_reset_lockout(sk_tpm *tpm, sk_tpm_status *status);
/* Extends SHA-256 PCR `pcr` with `digest` (32 bytes), with the PCR's empty authorization. */
int sk_tpm_extend_pcr(sk_tpm *tpm, uint32_t pcr, const uint8_t *digest, sk_tpm_status *status);
