#ifndef COUTBOUND_H
#define COUTBOUND_H
// HTTP out (docs/protocol.md §16): libcurl's easy interface behind a header
// that names none of its types (its options are variadic, which Swift cannot
// call), and GnuTLS's HMAC-SHA256 for the webhook's signature.

#include <stddef.h>
#include <stdint.h>

/// One connection's worth of libcurl: reused from request to request, so
/// that a receiver's keep-alive connection serves a burst.
typedef struct cto_client cto_client;

/// Once per process, before any other thread starts (curl_global_init).
int cto_global_init(void);

cto_client *cto_client_new(void);
void cto_client_free(cto_client *client);

/// What a POST came to.
typedef struct {
    /// The HTTP status, or 0 when no answer came (then `error` says why).
    long status;
    /// libcurl's words for a failure ("Couldn't connect to server"), NUL-terminated.
    char error[256];
} cto_result;

/// POSTs `body` to `url` with `headers` ("Name: value" each), waiting at
/// most `timeout_ms` in all (`connect_timeout_ms` to connect). The answer's
/// body is read and dropped. Blocks: call it on a thread of its own.
void cto_post(cto_client *client, const char *url, const char *const *headers, size_t header_count, const void *body,
              size_t body_length, long connect_timeout_ms, long timeout_ms, const char *ca_file, cto_result *result);

/// HMAC-SHA256 of `data` under `key` into `digest`; 0 on success.
int cto_hmac_sha256(const void *key, size_t key_length, const void *data, size_t length, uint8_t digest[32]);

#endif
