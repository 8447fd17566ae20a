// Web Push's cryptography (docs/protocol.md §17) through OpenSSL's libcrypto:
// the service's P-256 key (VAPID, RFC 8292), an ES256 signature of a JWT,
// and a message encrypted for a subscription (RFC 8291, aes128gcm of RFC 8188).
// Every function returns 0 on success and -1 on failure.
#ifndef CWEBPUSH_H
#define CWEBPUSH_H

#include <stddef.h>
#include <stdint.h>

/// A new P-256 key: its private scalar (32 bytes) and public point (65 bytes, uncompressed).
int ctw_generate(uint8_t private_key[32], uint8_t public_key[65]);

/// The public point of a private scalar; fails for a scalar that is not a key.
int ctw_public_key(const uint8_t private_key[32], uint8_t public_key[65]);

/// The key as PKCS#8 PEM text into `pem` (at most `capacity` bytes, NUL-terminated).
int ctw_private_to_pem(const uint8_t private_key[32], char *pem, size_t capacity);

/// The private scalar of a PEM private key of P-256.
int ctw_private_from_pem(const char *pem, uint8_t private_key[32]);

/// ES256: ECDSA over SHA-256 of `data`, as JWS writes it (r and s, 32 bytes each).
int ctw_sign_es256(const uint8_t private_key[32], const uint8_t *data, size_t length, uint8_t signature[64]);

/// Whether `point` (65 bytes) is an uncompressed point on P-256.
int ctw_valid_public_key(const uint8_t point[65]);

/// Encrypts `plaintext` for a subscription's `p256dh` (65 bytes) and `auth`
/// (16 bytes) in one aes128gcm record, under a fresh key pair and a fresh
/// random salt: the header (salt, record size, the key's id) then the record.
/// `out` holds at least `length + 86 + 17` bytes; `*out_length` is set.
int ctw_encrypt(
    const uint8_t p256dh[65], const uint8_t auth[16], const uint8_t *plaintext, size_t length, uint8_t *out,
    size_t *out_length);

/// The same with the salt and the sender's private key given: for tests only
/// (RFC 8291's example), never for a message sent.
int ctw_encrypt_with(
    const uint8_t p256dh[65], const uint8_t auth[16], const uint8_t salt[16], const uint8_t sender_private[32],
    const uint8_t *plaintext, size_t length, uint8_t *out, size_t *out_length);

/// SHA-256 of `data`.
int ctw_sha256(const uint8_t *data, size_t length, uint8_t digest[32]);

#endif
