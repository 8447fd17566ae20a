// What the HTTP endpoint's server's files share (see chttpserver.h): its
// types and the functions one file gives the others. Not a public header.
//
// Locking: one mutex per server guards every exchange's and connection's
// shared fields and the list of event streams. libmicrohttpd's suspend is
// called with it held (so that no resume can come before it); resume is
// called without it, counted in `resuming` so that a stop waits for those
// still under way before it stops the daemon.
#ifndef CHTTPSERVER_INTERNAL_H
#define CHTTPSERVER_INTERNAL_H
#define _GNU_SOURCE
#include "chttpserver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

enum phase { PHASE_HEAD, PHASE_BODY, PHASE_WAITING, PHASE_ANSWERED };

/// One connection: the deadline its next head must meet.
struct link {
    int fd;
    int64_t deadline_ms;  // 0: none (a request being answered, or a stream)
    unsigned requests;
    struct link *prev, *next;
};

struct cth_exchange {
    cth_server *server;
    struct MHD_Connection *connection;
    struct link *link;
    int refs;  // libmicrohttpd's, and the handler's while it owes an answer
    enum phase phase;
    int suspended;
    char *target;
    char method[16];
    char peer[INET6_ADDRSTRLEN];
    uint8_t *body;
    size_t body_length, body_capacity;
    // A body past the limit (chunked: its length was not known): read on and
    // dropped, up to as much again, to be answered 413; past that, closed.
    size_t dropped;
    int too_large;
    // The answer.
    int answered, stream, close;
    unsigned status;
    char *headers;
    uint8_t *answer;
    size_t answer_length;
    // An event stream's bytes not yet sent.
    uint8_t *pending;
    size_t pending_start, pending_end, pending_capacity;
    int stream_ended;
    // A body sent as it is made (`cth_respond_body`): not an event stream,
    // its writer told when it may write on, and its end complete or failed.
    int body_stream, body_failed, wants_more;
    cth_more_fn more;
    void *more_context;
    // A plain (not TLS) stream's socket: while the stream is suspended, and so
    // libmicrohttpd leaves its socket alone, an event is sent on it at once.
    int direct_fd;
    struct cth_exchange *prev_stream, *next_stream;
    // Waiting for its answer (a stop answers those still waiting).
    int is_waiting;
    struct cth_exchange *prev_waiting, *next_waiting;
};

/// A certificate chain and its key, as handshakes take them.
struct credentials {
    gnutls_pcert_st certificates[16];
    unsigned count;
    gnutls_privkey_t key;
    struct credentials *retired;  // older ones: a handshake under way may hold them
};

struct cth_server {
    struct MHD_Daemon *daemon;
    cth_config config;
    cth_request_fn on_request;
    cth_log_fn on_log;
    void *context;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct link *links;
    int connections;
    cth_exchange *streams;
    int stream_count;
    cth_exchange *waiting;
    int resuming;
    int stopping;
    int exchanges;  // alive: the server is freed after the last
    int stopped;
    pthread_t sweeper;
};

// server.c
int64_t chs_now_ms(void);
void chs_say(cth_server *server, const char *format, ...);
/// Drops one reference; the caller holds the lock, which this releases.
void chs_release_and_unlock(cth_exchange *exchange);
/// Takes `exchange` off the waiting list; the caller holds the lock.
void chs_stop_waiting(cth_exchange *exchange);
void chs_finish_resume(cth_server *server, int count);

// connections.c
void chs_notify_connection(
    void *cls, struct MHD_Connection *connection, void **socket_context, enum MHD_ConnectionNotificationCode code);
/// The request line is in: the exchange begins, and a later request's head has its deadline.
void *chs_request_line(void *cls, const char *uri, struct MHD_Connection *connection);
void *chs_sweep(void *cls);

// head.c
/// What of RFC 9112's rules the head breaks, with its status; NULL when none.
const char *chs_check_head(cth_server *server, struct MHD_Connection *connection, const char *version, unsigned *status);

// answers.c
enum MHD_Result chs_queue_bytes(
    struct MHD_Connection *connection, unsigned status, const char *headers, const void *body, size_t length, int close);
enum MHD_Result chs_refuse(cth_exchange *exchange, unsigned status, const char *reason);
enum MHD_Result chs_queue_answer(cth_exchange *exchange);
/// Appends to a stream's pending bytes; the caller holds the lock. 0, or -1 past the backlog.
int chs_append_pending(cth_exchange *exchange, const uint8_t *bytes, size_t length);

// bodies.c
/// A body's writer waits while this much of it is not yet taken by the client.
#define CHS_BODY_MARK (64 * 1024)
/// A body's writer waiting to be told: told now (its `more` to call after
/// the lock is released, else NULL); the caller holds the lock.
cth_more_fn chs_take_more(cth_exchange *exchange, void **more_context);

// tls.c
int chs_pick_certificate(
    gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs, const gnutls_pk_algorithm_t *algorithms,
    int algorithm_count, gnutls_pcert_st **certificates, unsigned int *count, gnutls_privkey_t *key);
/// Whether `cth_tls_load` has made credentials current.
int chs_tls_ready(void);

#endif
