#include "coutbound.h"

#include <curl/curl.h>
#include <gnutls/crypto.h>
#include <stdlib.h>
#include <string.h>

struct cto_client {
    CURL *easy;
};

int cto_global_init(void) { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1; }

cto_client *cto_client_new(void) {
    cto_client *client = calloc(1, sizeof *client);
    if (client == NULL) return NULL;
    client->easy = curl_easy_init();
    if (client->easy == NULL) {
        free(client);
        return NULL;
    }
    return client;
}

void cto_client_free(cto_client *client) {
    if (client == NULL) return;
    curl_easy_cleanup(client->easy);
    free(client);
}

/// The answer's body is not kept.
static size_t discard(char *data, size_t size, size_t count, void *context) {
    (void)data;
    (void)context;
    return size * count;
}

void cto_post(cto_client *client, const char *url, const char *const *headers, size_t header_count, const void *body,
              size_t body_length, long connect_timeout_ms, long timeout_ms, const char *ca_file, cto_result *result) {
    CURL *easy = client->easy;
    result->status = 0;
    result->error[0] = '\0';
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < header_count; i++) {
        struct curl_slist *next = curl_slist_append(list, headers[i]);
        if (next == NULL) {
            curl_slist_free_all(list);
            strncpy(result->error, "out of memory", sizeof result->error - 1);
            return;
        }
        list = next;
    }
    // No "Expect: 100-continue": a receiver answers the whole request at once.
    list = curl_slist_append(list, "Expect:");
    char error[CURL_ERROR_SIZE] = {0};
    curl_easy_reset(easy);  // keeps the connection cache
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_length);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "coffee-tracker");
    if (ca_file != NULL) curl_easy_setopt(easy, CURLOPT_CAINFO, ca_file);
    CURLcode code = curl_easy_perform(easy);
    if (code == CURLE_OK) {
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &result->status);
    } else {
        const char *text = error[0] != '\0' ? error : curl_easy_strerror(code);
        strncpy(result->error, text, sizeof result->error - 1);
    }
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(list);
}

int cto_hmac_sha256(const void *key, size_t key_length, const void *data, size_t length, uint8_t digest[32]) {
    return gnutls_hmac_fast(GNUTLS_MAC_SHA256, key, key_length, data, length, digest) < 0 ? -1 : 0;
}
