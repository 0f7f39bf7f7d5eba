#pragma once
/* The EC_KEY/ECDSA_do_* calls are deprecated in OpenSSL 3 but remain supported there; they skip
   the provider decoder/encoder framework, which costs ~3 ms on first use in a one-shot CLI. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/obj_mac.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/x509.h>
#include <openssl/rand.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

/* Macros and variadic-free helpers that Swift cannot import directly. */
static inline int sitekeep_evp_gcm_set_ivlen(EVP_CIPHER_CTX *ctx, int len) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, len, NULL);
}
static inline int sitekeep_evp_gcm_get_tag(EVP_CIPHER_CTX *ctx, int len, void *tag) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, len, tag);
}
static inline int sitekeep_evp_gcm_set_tag(EVP_CIPHER_CTX *ctx, int len, void *tag) {
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, len, tag);
}
static inline BIO *sitekeep_bio_new_mem(const void *buf, int len) {
    return BIO_new_mem_buf(buf, len);
}
static inline long sitekeep_bio_get_mem_data(BIO *bio, char **pp) {
    return BIO_get_mem_data(bio, pp);
}
static inline int sitekeep_bio_set_close(BIO *bio) {
    return (int)BIO_set_close(bio, BIO_CLOSE);
}
