#ifndef CHTTPSERVER_H
#define CHTTPSERVER_H
// The HTTP endpoint's server: libmicrohttpd (HTTP/1.1, keep-alive, its
// parser) and GnuTLS (TLS, SHA-256, random bytes) behind a header that names
// neither library's types. libmicrohttpd runs its own thread (epoll); each
// request whose head and body are in is handed to `cth_request_fn` with its
// connection suspended, and answered later, from any thread, by
// `cth_respond`. What libmicrohttpd 0.9.75 lets through of RFC 9112's strict
// rules (both Content-Length and Transfer-Encoding, two different
// Content-Lengths, more than the allowed header lines or bytes, a head
// slower than the allowed time) is refused here before anything is answered.

#include <stddef.h>
#include <stdint.h>

typedef struct cth_server cth_server;
/// One request, from its request line to its answer.
typedef struct cth_exchange cth_exchange;

typedef struct {
    /// A listening socket, taken over (closed by `cth_server_stop`).
    int listen_fd;
    unsigned max_connections;
    /// How long a keep-alive connection may stay idle, in seconds.
    unsigned idle_timeout_s;
    /// How long a request's head may take to arrive, in milliseconds: from
    /// the connection's start for its first request, from the request line
    /// for a later one.
    unsigned head_timeout_ms;
    size_t max_head_bytes;
    unsigned max_head_lines;
    size_t max_body_bytes;
    /// An event stream further behind than this is ended.
    size_t max_stream_backlog;
    /// Serve TLS with the credentials of `cth_tls_load` (which must succeed first).
    int tls;
} cth_config;

/// Called on the server's thread once a request is whole; read it with the
/// `cth_request_*` calls during this call only, then answer with `cth_respond`.
typedef void (*cth_request_fn)(void *context, cth_exchange *exchange);
/// A line of the library's own, or of the server's (a head too slow, a refusal).
typedef void (*cth_log_fn)(void *context, const char *message);

/// Starts serving; NULL with `error` filled when it cannot.
cth_server *cth_server_start(
    const cth_config *config, cth_request_fn on_request, cth_log_fn on_log, void *context, char *error,
    size_t error_length);
/// Answers what is still waiting with 503, ends every event stream, closes
/// every connection and the listening socket.
void cth_server_stop(cth_server *server);

/// Reads PEM certificate chain and key and makes them the ones every later
/// handshake uses (those under way keep theirs): 0, or -1 with `error` filled
/// (unreadable PEM, or a key that is not the certificate's).
int cth_tls_load(
    cth_server *server, const char *certificate_pem, size_t certificate_length, const char *key_pem, size_t key_length,
    char *error, size_t error_length);
/// The same check without a server, for `coffee-tracker check` and start-up.
int cth_tls_check(
    const char *certificate_pem, size_t certificate_length, const char *key_pem, size_t key_length, char *error,
    size_t error_length);

const char *cth_request_method(cth_exchange *exchange);
/// The request target as sent: path and query, not decoded.
const char *cth_request_target(cth_exchange *exchange);
/// The first value of header `name` (any case), or NULL.
const char *cth_request_header(cth_exchange *exchange, const char *name);
const uint8_t *cth_request_body(cth_exchange *exchange, size_t *length);
/// The peer's address as text (`127.0.0.1`, `::1`).
const char *cth_request_peer(cth_exchange *exchange);

/// Answers `exchange` (once; any thread). `headers` is `Name: value\n` lines.
/// With `stream`, the connection stays open after `body` and receives every
/// later `cth_server_broadcast`; with `close`, it closes after the answer.
void cth_respond(
    cth_exchange *exchange, unsigned status, const char *headers, const uint8_t *body, size_t length, int stream,
    int close);
/// A body sent as it is made (chunked transfer encoding), for one answer
/// too large to hold: `cth_respond_body` sends the head, `cth_body_write`
/// each piece, `cth_body_end` the end. The writer is told to wait while
/// the client has not taken what it has (so a client that stops reading
/// holds one piece, never the whole body), and `more` is called, once for
/// each wait, when it may go on: most of it taken, or the client gone.
typedef void (*cth_more_fn)(void *more_context);
/// Answers `exchange` (once; any thread) with a body to come.
void cth_respond_body(cth_exchange *exchange, unsigned status, const char *headers, cth_more_fn more, void *more_context);
/// Queues `bytes` of the body: 0 write on; 1 wait for `more` first; -1 the
/// client is gone or the server stopping (nothing more will be sent; end it).
int cth_body_write(cth_exchange *exchange, const uint8_t *bytes, size_t length);
/// Ends the body and lets go of `exchange`: `failed` closes the connection
/// without the last chunk, so that the client sees the body cut short.
void cth_body_end(cth_exchange *exchange, int failed);
/// Appends `bytes` to every open event stream (any thread; never blocks).
void cth_server_broadcast(cth_server *server, const uint8_t *bytes, size_t length);
/// How many event streams are open.
int cth_server_streams(cth_server *server);

/// SHA-256 of `data` into `digest` (32 bytes).
int cth_sha256(const void *data, size_t length, uint8_t digest[32]);
/// `length` random bytes for keys (GnuTLS's key-grade generator): 0, or -1.
int cth_random(void *buffer, size_t length);

#endif
