/* See CTPMLoader.h. */
#include "CTPMLoader.h"

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* The tpm2-tss calls made here, bound with dlsym. The types come from libtss2-dev's headers
 * (for building only: each pointer has the type of the declaration it is bound to); the
 * libraries are the runtime's libtss2-*.so.0. */
#define API(name) __typeof__(&name) name
static struct {
    API(Tss2_TctiLdr_Initialize);
    API(Tss2_TctiLdr_Finalize);
    API(Esys_Initialize);
    API(Esys_Finalize);
    API(Esys_Free);
    API(Esys_CreatePrimary);
    API(Esys_Create);
    API(Esys_Load);
    API(Esys_Unseal);
    API(Esys_FlushContext);
    API(Esys_TR_SetAuth);
    API(Esys_StartAuthSession);
    API(Esys_TRSess_SetAttributes);
    API(Esys_PolicyPCR);
    API(Esys_PolicyAuthValue);
    API(Esys_PolicyGetDigest);
    API(Esys_GetCapability);
    API(Esys_PCR_Extend);
    API(Esys_DictionaryAttackParameters);
    API(Esys_DictionaryAttackLockReset);
    API(Tss2_MU_TPM2B_PUBLIC_Marshal);
    API(Tss2_MU_TPM2B_PUBLIC_Unmarshal);
    API(Tss2_MU_TPM2B_PRIVATE_Marshal);
    API(Tss2_MU_TPM2B_PRIVATE_Unmarshal);
    API(Tss2_RC_Decode);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const char *load_error = "libtss2 was not loaded";
static int loaded = -1;

#define BIND(handle, lib, symbol) \
    do { \
        *(void **)(&api.symbol) = dlsym(handle, #symbol); \
        if (api.symbol == NULL) { load_error = lib " lacks " #symbol "; install tpm2-tss 3.0 or later (Debian: libtss2-esys-3.0.2-0, libtss2-tctildr0)"; return; } \
    } while (0)

static void *open_library(const char *name) {
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        static char why[200];
        snprintf(why, sizeof why, "%s is not installed; a TPM slot needs tpm2-tss (Debian and Ubuntu: apt install libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-rc0)", name);
        load_error = why;
    }
    return handle;
}

static void load(void) {
    void *esys = open_library("libtss2-esys.so.0");
    if (esys == NULL) return;
    void *tctildr = open_library("libtss2-tctildr.so.0");
    if (tctildr == NULL) return;
    void *mu = open_library("libtss2-mu.so.0");
    if (mu == NULL) return;
    void *rc = open_library("libtss2-rc.so.0");
    if (rc == NULL) return;
    BIND(tctildr, "libtss2-tctildr.so.0", Tss2_TctiLdr_Initialize);
    BIND(tctildr, "libtss2-tctildr.so.0", Tss2_TctiLdr_Finalize);
    BIND(esys, "libtss2-esys.so.0", Esys_Initialize);
    BIND(esys, "libtss2-esys.so.0", Esys_Finalize);
    BIND(esys, "libtss2-esys.so.0", Esys_Free);
    BIND(esys, "libtss2-esys.so.0", Esys_CreatePrimary);
    BIND(esys, "libtss2-esys.so.0", Esys_Create);
    BIND(esys, "libtss2-esys.so.0", Esys_Load);
    BIND(esys, "libtss2-esys.so.0", Esys_Unseal);
    BIND(esys, "libtss2-esys.so.0", Esys_FlushContext);
    BIND(esys, "libtss2-esys.so.0", Esys_TR_SetAuth);
    BIND(esys, "libtss2-esys.so.0", Esys_StartAuthSession);
    BIND(esys, "libtss2-esys.so.0", Esys_TRSess_SetAttributes);
    BIND(esys, "libtss2-esys.so.0", Esys_PolicyPCR);
    BIND(esys, "libtss2-esys.so.0", Esys_PolicyAuthValue);
    BIND(esys, "libtss2-esys.so.0", Esys_PolicyGetDigest);
    BIND(esys, "libtss2-esys.so.0", Esys_GetCapability);
    BIND(esys, "libtss2-esys.so.0", Esys_PCR_Extend);
    BIND(esys, "libtss2-esys.so.0", Esys_DictionaryAttackParameters);
    BIND(esys, "libtss2-esys.so.0", Esys_DictionaryAttackLockReset);
    BIND(mu, "libtss2-mu.so.0", Tss2_MU_TPM2B_PUBLIC_Marshal);
    BIND(mu, "libtss2-mu.so.0", Tss2_MU_TPM2B_PUBLIC_Unmarshal);
    BIND(mu, "libtss2-mu.so.0", Tss2_MU_TPM2B_PRIVATE_Marshal);
    BIND(mu, "libtss2-mu.so.0", Tss2_MU_TPM2B_PRIVATE_Unmarshal);
    BIND(rc, "libtss2-rc.so.0", Tss2_RC_Decode);
    loaded = 0;   /* the handles stay open for the life of the process */
}

static int fail(sk_tpm_status *status, int code, TSS2_RC rc, const char *what) {
    status->code = code;
    status->rc = rc;
    if (rc != 0 && loaded == 0) {
        snprintf(status->message, sizeof status->message, "%s: %s (0x%x)", what, api.Tss2_RC_Decode(rc), rc);
    } else {
        snprintf(status->message, sizeof status->message, "%s", what);
    }
    return code;
}

static int ok(sk_tpm_status *status) {
    status->code = SK_TPM_OK;
    status->rc = 0;
    status->message[0] = 0;
    return SK_TPM_OK;
}

/* A TPM response code, sorted into what the caller must tell apart. */
static int classify(TSS2_RC rc) {
    if ((rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER) return SK_TPM_FAILED;
    uint32_t r = rc & 0xFFFF;
    if (r & TPM2_RC_FMT1) {
        switch (r & (TPM2_RC_FMT1 | 0x3F)) {
        case TPM2_RC_AUTH_FAIL: case TPM2_RC_BAD_AUTH: return SK_TPM_AUTH_FAIL;
        case TPM2_RC_POLICY_FAIL: return SK_TPM_POLICY_FAIL;
        default: return SK_TPM_FAILED;
        }
    }
    if (r == TPM2_RC_LOCKOUT) return SK_TPM_LOCKOUT;
    return SK_TPM_FAILED;
}

int sk_tpm_load(sk_tpm_status *status) {
    pthread_once(&once, load);
    if (loaded != 0) return fail(status, SK_TPM_NO_LIBRARY, 0, load_error);
    return ok(status);
}

struct sk_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
};

sk_tpm *sk_tpm_open(const char *conf, sk_tpm_status *status) {
    if (sk_tpm_load(status) != SK_TPM_OK) return NULL;
    if (conf == NULL || conf[0] == 0) conf = "device:/dev/tpmrm0";
    /* The device TCTI says only "I/O error" for a missing device and a refused one alike. */
    if (strncmp(conf, "device", 6) == 0 && (conf[6] == 0 || conf[6] == ':')) {
        const char *path = conf[6] == ':' && conf[7] != 0 ? conf + 7 : "/dev/tpmrm0";
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            fail(status, e == EACCES || e == EPERM ? SK_TPM_NO_ACCESS : e == ENOENT || e == ENODEV || e == ENXIO ? SK_TPM_NO_DEVICE : SK_TPM_UNREACHABLE, 0, path);
            if (status->code == SK_TPM_UNREACHABLE) snprintf(status->message, sizeof status->message, "%s: %s", path, strerror(e));
            return NULL;
        }
        close(fd);
    }
    sk_tpm *tpm = calloc(1, sizeof *tpm);
    if (tpm == NULL) { fail(status, SK_TPM_FAILED, 0, "out of memory"); return NULL; }
    TSS2_RC rc = api.Tss2_TctiLdr_Initialize(conf, &tpm->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        fail(status, SK_TPM_UNREACHABLE, rc, "the TCTI could not be opened");
        free(tpm);
        return NULL;
    }
    rc = api.Esys_Initialize(&tpm->esys, tpm->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        fail(status, SK_TPM_UNREACHABLE, rc, "ESAPI could not start on the TCTI");
        api.Tss2_TctiLdr_Finalize(&tpm->tcti);
        free(tpm);
        return NULL;
    }
    ok(status);
    return tpm;
}

void sk_tpm_close(sk_tpm *tpm) {
    if (tpm == NULL) return;
    api.Esys_Finalize(&tpm->esys);
    api.Tss2_TctiLdr_Finalize(&tpm->tcti);
    free(tpm);
}

/* The TCG storage root key template, ECC NIST P-256 (TCG TPM v2.0 Provisioning Guidance):
 * deterministic, so the same primary comes back on every call under the same owner seed. */
static int create_primary(sk_tpm *tpm, ESYS_TR *primary, sk_tpm_status *status) {
    TPM2B_SENSITIVE_CREATE sensitive = { 0 };
    TPM2B_PUBLIC template = { 0 };
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN
        | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    template.publicArea.unique.ecc.x.size = 32;
    template.publicArea.unique.ecc.y.size = 32;
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION creation = { 0 };
    TSS2_RC rc = api.Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                        &sensitive, &template, &outside, &creation, primary, NULL, NULL, NULL, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        int code = classify(rc);
        return fail(status, code == SK_TPM_AUTH_FAIL || code == SK_TPM_LOCKOUT ? code : SK_TPM_FAILED, rc,
                    "the storage primary key could not be created under the owner hierarchy (is an owner password set?)");
    }
    return ok(status);
}

static void pcr_selection(uint32_t mask, TPML_PCR_SELECTION *sel) {
    memset(sel, 0, sizeof *sel);
    sel->count = 1;
    sel->pcrSelections[0].hash = TPM2_ALG_SHA256;
    sel->pcrSelections[0].sizeofSelect = 3;
    sel->pcrSelections[0].pcrSelect[0] = mask & 0xff;
    sel->pcrSelections[0].pcrSelect[1] = (mask >> 8) & 0xff;
    sel->pcrSelections[0].pcrSelect[2] = (mask >> 16) & 0xff;
}

/* A session salted by the primary (an eavesdropper on the bus learns neither the session key nor,
 * from the HMACs, anything to test PINs against), AES-128-CFB parameter encryption. */
static int start_session(sk_tpm *tpm, ESYS_TR primary, TPM2_SE type, TPMA_SESSION attributes, ESYS_TR *session, sk_tpm_status *status) {
    TPMT_SYM_DEF sym = { .algorithm = TPM2_ALG_AES, .keyBits = { .aes = 128 }, .mode = { .aes = TPM2_ALG_CFB } };
    TPMT_SYM_DEF none = { .algorithm = TPM2_ALG_NULL };
    TSS2_RC rc = api.Esys_StartAuthSession(tpm->esys, type == TPM2_SE_TRIAL ? ESYS_TR_NONE : primary, ESYS_TR_NONE,
                                           ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL, type,
                                           type == TPM2_SE_TRIAL ? &none : &sym, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return fail(status, SK_TPM_FAILED, rc, "a TPM session could not be started");
    if (attributes != 0) {
        rc = api.Esys_TRSess_SetAttributes(tpm->esys, *session, attributes | TPMA_SESSION_CONTINUESESSION, 0xff);
        if (rc != TSS2_RC_SUCCESS) {
            api.Esys_FlushContext(tpm->esys, *session);
            *session = ESYS_TR_NONE;
            return fail(status, SK_TPM_FAILED, rc, "a TPM session could not be set up");
        }
    }
    return ok(status);
}

/* PolicyPCR over the current values of `mask`'s PCRs, then PolicyAuthValue when the object has an auth. */
static int apply_policy(sk_tpm *tpm, ESYS_TR session, uint32_t mask, int with_auth, sk_tpm_status *status) {
    TPML_PCR_SELECTION sel;
    pcr_selection(mask, &sel);
    TPM2B_DIGEST empty = { 0 };
    TSS2_RC rc = api.Esys_PolicyPCR(tpm->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &empty, &sel);
    if (rc != TSS2_RC_SUCCESS) return fail(status, SK_TPM_FAILED, rc, "TPM2_PolicyPCR failed (is the SHA-256 PCR bank active?)");
    if (with_auth) {
        rc = api.Esys_PolicyAuthValue(tpm->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
        if (rc != TSS2_RC_SUCCESS) return fail(status, SK_TPM_FAILED, rc, "TPM2_PolicyAuthValue failed");
    }
    return ok(status);
}

/* The TPM drops an authorization value's trailing zero bytes (TPM 2.0 Part 1, 19.6.4.3): drop
 * them here too, so seal and unseal use the same value whatever ESAPI does. */
static size_t auth_length_trimmed(const uint8_t *auth, size_t length) {
    while (length > 0 && auth[length - 1] == 0) length--;
    return length;
}

static void flush(sk_tpm *tpm, ESYS_TR *handle) {
    if (*handle != ESYS_TR_NONE) api.Esys_FlushContext(tpm->esys, *handle);
    *handle = ESYS_TR_NONE;
}

int sk_tpm_seal(sk_tpm *tpm, const uint8_t *secret, size_t secret_length, const uint8_t *auth, size_t auth_length,
                uint32_t pcr_mask, uint8_t *public_blob, size_t *public_length, uint8_t *private_blob, size_t *private_length,
                sk_tpm_status *status) {
    if (secret_length == 0 || secret_length > 128 || auth_length > 32 || pcr_mask >= (1u << 24)) {
        return fail(status, SK_TPM_FAILED, 0, "seal arguments out of range");
    }
    auth_length = auth_length_trimmed(auth, auth_length);
    ESYS_TR primary = ESYS_TR_NONE, trial = ESYS_TR_NONE, session = ESYS_TR_NONE;
    TPM2B_PUBLIC template = { 0 };
    TPM2B_SENSITIVE_CREATE sensitive = { 0 };
    TPM2B_PRIVATE *out_private = NULL;
    TPM2B_PUBLIC *out_public = NULL;
    TPM2B_DIGEST *policy = NULL;
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION creation = { 0 };
    TSS2_RC rc = TSS2_RC_SUCCESS;
    size_t offset = 0;
    if (create_primary(tpm, &primary, status) != SK_TPM_OK) goto done;

    template.publicArea.type = TPM2_ALG_KEYEDHASH;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT;
    /* Without a policy the auth value alone unseals; with one, only the policy does. */
    if (pcr_mask == 0) template.publicArea.objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
    /* Nothing to guess without a PIN: such an object stays usable during a lock-out. */
    if (auth_length == 0) template.publicArea.objectAttributes |= TPMA_OBJECT_NODA;
    template.publicArea.parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
    if (pcr_mask != 0) {
        if (start_session(tpm, primary, TPM2_SE_TRIAL, 0, &trial, status) != SK_TPM_OK) goto done;
        if (apply_policy(tpm, trial, pcr_mask, auth_length > 0, status) != SK_TPM_OK) goto done;
        rc = api.Esys_PolicyGetDigest(tpm->esys, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &policy);
        if (rc != TSS2_RC_SUCCESS) { fail(status, SK_TPM_FAILED, rc, "TPM2_PolicyGetDigest failed"); goto done; }
        template.publicArea.authPolicy = *policy;
        flush(tpm, &trial);
    }
    sensitive.sensitive.userAuth.size = (UINT16)auth_length;
    if (auth_length > 0) memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_length);
    sensitive.sensitive.data.size = (UINT16)secret_length;
    memcpy(sensitive.sensitive.data.buffer, secret, secret_length);
    /* The session encrypts inSensitive (the PIN and the secret) on its way to the TPM. */
    if (start_session(tpm, primary, TPM2_SE_HMAC, TPMA_SESSION_DECRYPT, &session, status) != SK_TPM_OK) goto done;
    rc = api.Esys_Create(tpm->esys, primary, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outside, &creation,
                                 &out_private, &out_public, NULL, NULL, NULL);
    if (rc != TSS2_RC_SUCCESS) { fail(status, classify(rc) == SK_TPM_LOCKOUT ? SK_TPM_LOCKOUT : SK_TPM_FAILED, rc, "TPM2_Create failed"); goto done; }
    rc = api.Tss2_MU_TPM2B_PUBLIC_Marshal(out_public, public_blob, *public_length, &offset);
    if (rc != TSS2_RC_SUCCESS) { fail(status, SK_TPM_FAILED, rc, "the sealed object's public area does not fit"); goto done; }
    *public_length = offset;
    offset = 0;
    rc = api.Tss2_MU_TPM2B_PRIVATE_Marshal(out_private, private_blob, *private_length, &offset);
    if (rc != TSS2_RC_SUCCESS) { fail(status, SK_TPM_FAILED, rc, "the sealed object's private area does not fit"); goto done; }
    *private_length = offset;
    ok(status);
done:
    explicit_bzero(&sensitive, sizeof sensitive);
    flush(tpm, &trial);
    flush(tpm, &session);
    flush(tpm, &primary);
    api.Esys_Free(out_private);
    api.Esys_Free(out_public);
    api.Esys_Free(policy);
    return status->code;
}

int sk_tpm_unseal(sk_tpm *tpm, const uint8_t *public_blob, size_t public_length, const uint8_t *private_blob, size_t private_length,
                  const uint8_t *auth, size_t auth_length, uint32_t pcr_mask, uint8_t *out, size_t capacity, size_t *out_length,
                  sk_tpm_status *status) {
    if (auth_length > 32 || pcr_mask >= (1u << 24)) return fail(status, SK_TPM_FAILED, 0, "unseal arguments out of range");
    auth_length = auth_length_trimmed(auth, auth_length);
    ESYS_TR primary = ESYS_TR_NONE, object = ESYS_TR_NONE, session = ESYS_TR_NONE;
    TPM2B_PUBLIC in_public = { 0 };
    TPM2B_PRIVATE in_private = { 0 };
    TPM2B_AUTH value = { 0 };
    TPM2B_SENSITIVE_DATA *data = NULL;
    size_t offset = 0;
    TSS2_RC rc = api.Tss2_MU_TPM2B_PUBLIC_Unmarshal(public_blob, public_length, &offset, &in_public);
    if (rc != TSS2_RC_SUCCESS || offset != public_length) return fail(status, SK_TPM_BAD_BLOB, rc, "the sealed object's public area does not parse");
    offset = 0;
    rc = api.Tss2_MU_TPM2B_PRIVATE_Unmarshal(private_blob, private_length, &offset, &in_private);
    if (rc != TSS2_RC_SUCCESS || offset != private_length) return fail(status, SK_TPM_BAD_BLOB, rc, "the sealed object's private area does not parse");
    if (create_primary(tpm, &primary, status) != SK_TPM_OK) goto done;
    rc = api.Esys_Load(tpm->esys, primary, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_private, &in_public, &object);
    if (rc != TSS2_RC_SUCCESS) {
        /* Edited blobs fail the integrity check; blobs of another TPM (or another owner seed) too. */
        fail(status, classify(rc) == SK_TPM_LOCKOUT ? SK_TPM_LOCKOUT : SK_TPM_BAD_BLOB, rc, "the sealed object does not load on this TPM");
        goto done;
    }
    value.size = (UINT16)auth_length;
    if (auth_length > 0) memcpy(value.buffer, auth, auth_length);
    rc = api.Esys_TR_SetAuth(tpm->esys, object, &value);
    explicit_bzero(&value, sizeof value);
    if (rc != TSS2_RC_SUCCESS) { fail(status, SK_TPM_FAILED, rc, "the authorization value was refused by ESAPI"); goto done; }
    if (pcr_mask != 0) {
        if (start_session(tpm, primary, TPM2_SE_POLICY, TPMA_SESSION_ENCRYPT, &session, status) != SK_TPM_OK) goto done;
        if (apply_policy(tpm, session, pcr_mask, auth_length > 0, status) != SK_TPM_OK) goto done;
    } else {
        if (start_session(tpm, primary, TPM2_SE_HMAC, TPMA_SESSION_ENCRYPT, &session, status) != SK_TPM_OK) goto done;
    }
    rc = api.Esys_Unseal(tpm->esys, object, session, ESYS_TR_NONE, ESYS_TR_NONE, &data);
    if (rc != TSS2_RC_SUCCESS) { fail(status, classify(rc), rc, "TPM2_Unseal was refused"); goto done; }
    if (data->size > capacity) { fail(status, SK_TPM_BAD_BLOB, 0, "the sealed data is longer than expected"); goto done; }
    memcpy(out, data->buffer, data->size);
    *out_length = data->size;
    ok(status);
done:
    if (data != NULL) explicit_bzero(data, sizeof *data);
    api.Esys_Free(data);
    flush(tpm, &session);
    flush(tpm, &object);
    flush(tpm, &primary);
    return status->code;
}

int sk_tpm_lockout_state(sk_tpm *tpm, sk_tpm_lockout *out, sk_tpm_status *status) {
    TPMS_CAPABILITY_DATA *caps = NULL;
    TPMI_YES_NO more = 0;
    memset(out, 0, sizeof *out);
    TSS2_RC rc = api.Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                        TPM2_PT_PERMANENT, TPM2_PT_LOCKOUT_RECOVERY - TPM2_PT_PERMANENT + 1, &more, &caps);
    if (rc != TSS2_RC_SUCCESS) return fail(status, SK_TPM_FAILED, rc, "TPM2_GetCapability failed");
    for (UINT32 i = 0; i < caps->data.tpmProperties.count; i++) {
        TPMS_TAGGED_PROPERTY p = caps->data.tpmProperties.tpmProperty[i];
        switch (p.property) {
        case TPM2_PT_PERMANENT: out->in_lockout = (p.value & TPMA_PERMANENT_INLOCKOUT) != 0; break;
        case TPM2_PT_LOCKOUT_COUNTER: out->failed_tries = p.value; break;
        case TPM2_PT_MAX_AUTH_FAIL: out->max_tries = p.value; break;
        case TPM2_PT_LOCKOUT_INTERVAL: out->recovery_seconds = p.value; break;
        case TPM2_PT_LOCKOUT_RECOVERY: out->lockout_recovery_seconds = p.value; break;
        default: break;
        }
    }
    api.Esys_Free(caps);
    return ok(status);
}

int sk_tpm_set_dictionary_attack_parameters(sk_tpm *tpm, uint32_t max_tries, uint32_t recovery_seconds,
                                            uint32_t lockout_recovery_seconds, sk_tpm_status *status) {
    TSS2_RC rc = api.Esys_DictionaryAttackParameters(tpm->esys, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                                     max_tries, recovery_seconds, lockout_recovery_seconds);
    if (rc != TSS2_RC_SUCCESS) return fail(status, classify(rc), rc, "TPM2_DictionaryAttackParameters failed");
    return ok(status);
}

int sk_tpm_reset_lockout(sk_tpm *tpm, sk_tpm_status *status) {
    TSS2_RC rc = api.Esys_DictionaryAttackLockReset(tpm->esys, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE);
    if (rc != TSS2_RC_SUCCESS) return fail(status, classify(rc), rc, "TPM2_DictionaryAttackLockReset failed");
    return ok(status);
}

int sk_tpm_extend_pcr(sk_tpm *tpm, uint32_t pcr, const uint8_t *digest, sk_tpm_status *status) {
    if (pcr > 23) return fail(status, SK_TPM_FAILED, 0, "no such PCR");
    TPML_DIGEST_VALUES values = { 0 };
    values.count = 1;
    values.digests[0].hashAlg = TPM2_ALG_SHA256;
    memcpy(values.digests[0].digest.sha256, digest, 32);
    TSS2_RC rc = api.Esys_PCR_Extend(tpm->esys, ESYS_TR_PCR0 + pcr, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &values);
    if (rc != TSS2_RC_SUCCESS) return fail(status, SK_TPM_FAILED, rc, "TPM2_PCR_Extend failed");
    return ok(status);
}
