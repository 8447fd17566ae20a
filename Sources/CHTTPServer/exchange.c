// A request as the handler reads it, its answer from any thread, and the
// small services of the header (counts, SHA-256, random bytes).
#include "internal.h"

void cth_respond(
    cth_exchange *exchange, unsigned status, const char *headers, const uint8_t *body, size_t length, int stream,
    int close) {
    cth_server *server = exchange->server;
    uint8_t *copy = length ? malloc(length) : NULL;
    if (copy) memcpy(copy, body, length);
    char *header_copy = headers ? strdup(headers) : NULL;
    pthread_mutex_lock(&server->lock);
    exchange->status = status;
    exchange->headers = header_copy;
    exchange->answer = copy;
    exchange->answer_length = copy ? length : 0;
    exchange->stream = stream;
    exchange->close = close;
    exchange->answered = 1;
    chs_stop_waiting(exchange);
    struct MHD_Connection *connection = NULL;
    if (exchange->suspended && exchange->connection) {
        exchange->suspended = 0;
        connection = exchange->connection;
        server->resuming++;
    }
    chs_release_and_unlock(exchange);  // still held by libmicrohttpd while suspended
    if (connection) {
        MHD_resume_connection(connection);
        chs_finish_resume(server, 1);
    }
}

int cth_server_streams(cth_server *server) {
    pthread_mutex_lock(&server->lock);
    int n = server->stream_count;
    pthread_mutex_unlock(&server->lock);
    return n;
}

const char *cth_request_method(cth_exchange *exchange) { return exchange->method; }

const char *cth_request_target(cth_exchange *exchange) { return exchange->target; }

const char *cth_request_peer(cth_exchange *exchange) { return exchange->peer; }

const char *cth_request_header(cth_exchange *exchange, const char *name) {
    return exchange->connection ? MHD_lookup_connection_value(exchange->connection, MHD_HEADER_KIND, name) : NULL;
}

const uint8_t *cth_request_body(cth_exchange *exchange, size_t *length) {
    *length = exchange->body_length;
    return exchange->body;
}

int cth_sha256(const void *data, size_t length, uint8_t digest[32]) {
    return gnutls_hash_fast(GNUTLS_DIG_SHA256, data, length, digest) < 0 ? -1 : 0;
}

int cth_random(void *buffer, size_t length) { return gnutls_rnd(GNUTLS_RND_KEY, buffer, length) < 0 ? -1 : 0; }
