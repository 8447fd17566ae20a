// A body sent as it is made (see chttpserver.h): its head at once, its
// pieces as the writer hands them over, sent chunked by libmicrohttpd's
// reader (answers.c) as the client takes them. The writer holds the
// handler's reference to the exchange until `cth_body_end`, so that a client
// gone meanwhile never frees what the writer still names.
#include "internal.h"

cth_more_fn chs_take_more(cth_exchange *exchange, void **more_context) {
    if (!exchange->wants_more) return NULL;
    exchange->wants_more = 0;
    *more_context = exchange->more_context;
    return exchange->more;
}

/// Resumes a suspended connection to send what is pending (or to end);
/// the caller holds the lock. The connection to resume after it is released.
static struct MHD_Connection *wake(cth_exchange *exchange) {
    if (!exchange->suspended || !exchange->connection) return NULL;
    exchange->suspended = 0;
    exchange->server->resuming++;
    return exchange->connection;
}

static void resume(cth_server *server, struct MHD_Connection *connection) {
    if (!connection) return;
    MHD_resume_connection(connection);
    chs_finish_resume(server, 1);
}

void cth_respond_body(
    cth_exchange *exchange, unsigned status, const char *headers, cth_more_fn more, void *more_context) {
    cth_server *server = exchange->server;
    char *header_copy = headers ? strdup(headers) : NULL;
    pthread_mutex_lock(&server->lock);
    exchange->status = status;
    exchange->headers = header_copy;
    exchange->stream = 1;
    exchange->body_stream = 1;
    exchange->more = more;
    exchange->more_context = more_context;
    exchange->answered = 1;
    chs_stop_waiting(exchange);
    struct MHD_Connection *connection = wake(exchange);
    pthread_mutex_unlock(&server->lock);  // the handler's reference is the writer's now, until cth_body_end
    resume(server, connection);
}

int cth_body_write(cth_exchange *exchange, const uint8_t *bytes, size_t length) {
    cth_server *server = exchange->server;
    pthread_mutex_lock(&server->lock);
    if (!exchange->connection || exchange->stream_ended || server->stopping) {
        pthread_mutex_unlock(&server->lock);
        return -1;
    }
    if (chs_append_pending(exchange, bytes, length) < 0) {  // a writer that did not wait: the body is cut short
        exchange->stream_ended = 1;
        exchange->body_failed = 1;
        struct MHD_Connection *connection = wake(exchange);
        pthread_mutex_unlock(&server->lock);
        resume(server, connection);
        return -1;
    }
    int wait = exchange->pending_end - exchange->pending_start >= CHS_BODY_MARK;
    if (wait) exchange->wants_more = 1;
    struct MHD_Connection *connection = wake(exchange);
    pthread_mutex_unlock(&server->lock);
    resume(server, connection);
    return wait;
}

void cth_body_end(cth_exchange *exchange, int failed) {
    cth_server *server = exchange->server;
    pthread_mutex_lock(&server->lock);
    exchange->stream_ended = 1;
    exchange->body_failed |= failed;
    exchange->wants_more = 0;
    struct MHD_Connection *connection = wake(exchange);
    chs_release_and_unlock(exchange);
    resume(server, connection);
}
