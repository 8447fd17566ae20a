#include "cwebpush.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <string.h>

static const char *curve = "prime256v1";

// The uncompressed public point of `private_key`, computed on the curve.
int ctw_public_key(const uint8_t private_key[32], uint8_t public_key[65]) {
    int result = -1;
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    EC_POINT *point = group ? EC_POINT_new(group) : NULL;
    BIGNUM *scalar = BN_bin2bn(private_key, 32, NULL);
    BN_CTX *context = BN_CTX_new();
    if (group && point && scalar && context && !BN_is_zero(scalar) && BN_cmp(scalar, EC_GROUP_get0_order(group)) < 0 &&
        EC_POINT_mul(group, point, scalar, NULL, NULL, context) == 1 &&
        EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, public_key, 65, context) == 65) {
        result = 0;
    }
    BN_CTX_free(context);
    BN_clear_free(scalar);
    EC_POINT_free(point);
    EC_GROUP_free(group);
    return result;
}

int ctw_valid_public_key(const uint8_t point[65]) {
    if (point[0] != 0x04) return -1;
    EC_GROUP *group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
    EC_POINT *p = group ? EC_POINT_new(group) : NULL;
    int result = (p && EC_POINT_oct2point(group, p, point, 65, NULL) == 1 && EC_POINT_is_on_curve(group, p, NULL) == 1) ? 0 : -1;
    EC_POINT_free(p);
    EC_GROUP_free(group);
    return result;
}

// An EVP key of the private scalar (with its public point), or of a public point alone.
static EVP_PKEY *make_key(const uint8_t *private_key, const uint8_t public_key[65]) {
    EVP_PKEY *key = NULL;
    BIGNUM *scalar = private_key ? BN_bin2bn(private_key, 32, NULL) : NULL;
    OSSL_PARAM_BLD *builder = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (!builder || !context || (private_key && !scalar)) goto done;
    if (OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, curve, 0) != 1) goto done;
    if (OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, public_key, 65) != 1) goto done;
    if (scalar && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, scalar) != 1) goto done;
    params = OSSL_PARAM_BLD_to_param(builder);
    if (!params || EVP_PKEY_fromdata_init(context) != 1) goto done;
    if (EVP_PKEY_fromdata(context, &key, scalar ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) != 1) key = NULL;
done:
    EVP_PKEY_CTX_free(context);
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(builder);
    BN_clear_free(scalar);
    return key;
}

static EVP_PKEY *private_key_of(const uint8_t private_key[32]) {
    uint8_t public_key[65];
    if (ctw_public_key(private_key, public_key) != 0) return NULL;
    return make_key(private_key, public_key);
}

int ctw_generate(uint8_t private_key[32], uint8_t public_key[65]) {
    for (int tries = 0; tries < 8; tries++) {
        if (RAND_bytes(private_key, 32) != 1) return -1;
        if (ctw_public_key(private_key, public_key) == 0) return 0;  // a scalar under the order, not zero
    }
    return -1;
}

int ctw_private_to_pem(const uint8_t private_key[32], char *pem, size_t capacity) {
    EVP_PKEY *key = private_key_of(private_key);
    BIO *bio = BIO_new(BIO_s_mem());
    int result = -1;
    if (key && bio && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        char *data = NULL;
        long length = BIO_get_mem_data(bio, &data);
        if (length > 0 && (size_t)length < capacity) {
            memcpy(pem, data, (size_t)length);
            pem[length] = 0;
            result = 0;
        }
    }
    BIO_free(bio);
    EVP_PKEY_free(key);
    return result;
}

int ctw_private_from_pem(const char *pem, uint8_t private_key[32]) {
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIGNUM *scalar = NULL;
    char group[32] = {0};
    int result = -1;
    if (key && EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, NULL) == 1 &&
        strcmp(group, curve) == 0 && EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &scalar) == 1 &&
        BN_bn2binpad(scalar, private_key, 32) == 32) {
        result = 0;
    }
    BN_clear_free(scalar);
    EVP_PKEY_free(key);
    BIO_free(bio);
    return result;
}

int ctw_sign_es256(const uint8_t private_key[32], const uint8_t *data, size_t length, uint8_t signature[64]) {
    EVP_PKEY *key = private_key_of(private_key);
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    uint8_t der[80];
    size_t der_length = sizeof der;
    int result = -1;
    if (key && context && EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) == 1 &&
        EVP_DigestSign(context, der, &der_length, data, length) == 1) {
        const uint8_t *cursor = der;
        ECDSA_SIG *pair = d2i_ECDSA_SIG(NULL, &cursor, (long)der_length);
        if (pair) {
            const BIGNUM *r = NULL, *s = NULL;
            ECDSA_SIG_get0(pair, &r, &s);
            if (BN_bn2binpad(r, signature, 32) == 32 && BN_bn2binpad(s, signature + 32, 32) == 32) result = 0;
            ECDSA_SIG_free(pair);
        }
    }
    EVP_MD_CTX_free(context);
    EVP_PKEY_free(key);
    return result;
}

// HMAC-SHA-256 of the concatenation of up to three parts: HKDF's extract and
// one block of its expand (RFC 5869; every length here is at most 32).
static int hmac(const uint8_t *key, size_t key_length, const uint8_t *a, size_t a_length, const uint8_t *b,
                size_t b_length, const uint8_t *c, size_t c_length, uint8_t out[32]) {
    uint8_t joined[256];
    if (a_length + b_length + c_length > sizeof joined) return -1;
    memcpy(joined, a, a_length);
    if (b_length) memcpy(joined + a_length, b, b_length);
    if (c_length) memcpy(joined + a_length + b_length, c, c_length);
    unsigned int length = 32;
    return HMAC(EVP_sha256(), key, (int)key_length, joined, a_length + b_length + c_length, out, &length) ? 0 : -1;
}

int ctw_encrypt_with(const uint8_t p256dh[65], const uint8_t auth[16], const uint8_t salt[16],
                     const uint8_t sender_private[32], const uint8_t *plaintext, size_t length, uint8_t *out,
                     size_t *out_length) {
    int result = -1;
    uint8_t sender_public[65], secret[32], prk_key[32], ikm[32], prk[32], cek[32], nonce[32];
    size_t secret_length = sizeof secret;
    EVP_PKEY *sender = NULL, *receiver = NULL;
    EVP_PKEY_CTX *derive = NULL;
    EVP_CIPHER_CTX *cipher = NULL;
    if (ctw_public_key(sender_private, sender_public) != 0) goto done;
    sender = make_key(sender_private, sender_public);
    receiver = make_key(NULL, p256dh);
    if (!sender || !receiver) goto done;
    // The shared secret (ECDH), then RFC 8291's key: HKDF with the subscription's auth secret.
    derive = EVP_PKEY_CTX_new(sender, NULL);
    if (!derive || EVP_PKEY_derive_init(derive) != 1 || EVP_PKEY_derive_set_peer(derive, receiver) != 1 ||
        EVP_PKEY_derive(derive, secret, &secret_length) != 1 || secret_length != 32)
        goto done;
    static const uint8_t key_info[] = "WebPush: info";  // with its NUL: "WebPush: info" || 0x00
    uint8_t info[sizeof key_info + 65 + 65 + 1];
    memcpy(info, key_info, sizeof key_info);
    memcpy(info + sizeof key_info, p256dh, 65);
    memcpy(info + sizeof key_info + 65, sender_public, 65);
    info[sizeof info - 1] = 1;
    if (hmac(auth, 16, secret, 32, NULL, 0, NULL, 0, prk_key) != 0) goto done;
    if (hmac(prk_key, 32, info, sizeof info, NULL, 0, NULL, 0, ikm) != 0) goto done;
    // RFC 8188: the content's key and nonce from the salt.
    static const uint8_t cek_info[] = "Content-Encoding: aes128gcm\0\1";
    static const uint8_t nonce_info[] = "Content-Encoding: nonce\0\1";
    if (hmac(salt, 16, ikm, 32, NULL, 0, NULL, 0, prk) != 0) goto done;
    if (hmac(prk, 32, cek_info, sizeof cek_info - 1, NULL, 0, NULL, 0, cek) != 0) goto done;
    if (hmac(prk, 32, nonce_info, sizeof nonce_info - 1, NULL, 0, NULL, 0, nonce) != 0) goto done;
    // The header: salt, record size (big-endian), the key id's length and the sender's public key.
    uint32_t record_size = 4096;
    if (length + 17 > record_size) goto done;
    memcpy(out, salt, 16);
    out[16] = (uint8_t)(record_size >> 24);
    out[17] = (uint8_t)(record_size >> 16);
    out[18] = (uint8_t)(record_size >> 8);
    out[19] = (uint8_t)record_size;
    out[20] = 65;
    memcpy(out + 21, sender_public, 65);
    // One record: the plaintext, the last record's delimiter (2), then the tag.
    cipher = EVP_CIPHER_CTX_new();
    int written = 0, final_length = 0;
    uint8_t delimiter = 2;
    uint8_t *record = out + 86;
    if (!cipher || EVP_EncryptInit_ex(cipher, EVP_aes_128_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1 ||
        EVP_EncryptInit_ex(cipher, NULL, NULL, cek, nonce) != 1 ||
        EVP_EncryptUpdate(cipher, record, &written, plaintext, (int)length) != 1)
        goto done;
    int more = 0;
    if (EVP_EncryptUpdate(cipher, record + written, &more, &delimiter, 1) != 1) goto done;
    written += more;
    if (EVP_EncryptFinal_ex(cipher, record + written, &final_length) != 1) goto done;
    written += final_length;
    if (EVP_CIPHER_CTX_ctrl(cipher, EVP_CTRL_GCM_GET_TAG, 16, record + written) != 1) goto done;
    *out_length = 86 + (size_t)written + 16;
    result = 0;
done:
    EVP_CIPHER_CTX_free(cipher);
    EVP_PKEY_CTX_free(derive);
    EVP_PKEY_free(sender);
    EVP_PKEY_free(receiver);
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(cek, sizeof cek);
    return result;
}

int ctw_encrypt(const uint8_t p256dh[65], const uint8_t auth[16], const uint8_t *plaintext, size_t length, uint8_t *out,
                size_t *out_length) {
    uint8_t salt[16], sender_private[32], sender_public[65];
    // A fresh salt and a fresh sender key for every message (RFC 8291 §3.4).
    if (RAND_bytes(salt, 16) != 1 || ctw_generate(sender_private, sender_public) != 0) return -1;
    int result = ctw_encrypt_with(p256dh, auth, salt, sender_private, plaintext, length, out, out_length);
    OPENSSL_cleanse(sender_private, sizeof sender_private);
    return result;
}

int ctw_sha256(const uint8_t *data, size_t length, uint8_t digest[32]) {
    unsigned int size = 32;
    return EVP_Digest(data, length, digest, &size, EVP_sha256(), NULL) == 1 ? 0 : -1;
}
