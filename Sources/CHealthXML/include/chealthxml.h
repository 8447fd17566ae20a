#ifndef CHEALTHXML_H
#define CHEALTHXML_H
// A small streaming reader of Apple Health exports over libxml2's
// xmlTextReader. Its header names no libxml2 type: libxml2's own headers pull
// in ICU's, which clash with the copy Foundation carries, so Swift sees only this.

typedef struct ct_health_reader ct_health_reader;

/// Reads up to `length` bytes into `buffer`: the count, 0 at the end, -1 on an error.
typedef int (*ct_health_read_fn)(void *context, char *buffer, int length);

/// A reader pulling from `read`; NULL when out of memory.
ct_health_reader *ct_health_open(ct_health_read_fn read, void *context);
void ct_health_free(ct_health_reader *reader);

/// Moves to the root element: 1 there, 0 when the document holds none, -1 on an error.
int ct_health_root(ct_health_reader *reader);
/// Moves to the next element directly under the root, skipping the subtree
/// of the one before unread: 1 there, 0 at the end, -1 on an error.
int ct_health_next_child(ct_health_reader *reader);
/// Whether the current element's local name is `name`.
int ct_health_is(ct_health_reader *reader, const char *name);
/// The current element's local name, copied into `out` (truncated to `capacity`).
void ct_health_name(ct_health_reader *reader, char *out, int capacity);
/// Whether attribute `name` of the current element equals `value`, without copying it.
int ct_health_attribute_is(ct_health_reader *reader, const char *name, const char *value);
/// Attribute `name` of the current element copied into `out` (NUL-terminated,
/// at most `capacity` - 1 bytes): its length, or -1 when it is absent or too long.
int ct_health_attribute(ct_health_reader *reader, const char *name, char *out, int capacity);
/// The parser's line.
int ct_health_line(ct_health_reader *reader);
/// The first error the parser reported ("" for none), and its line.
const char *ct_health_error(ct_health_reader *reader);
int ct_health_error_line(ct_health_reader *reader);
#endif
