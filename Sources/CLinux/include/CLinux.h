// Linux calls that Glibc's Swift module leaves out (it is built without
// _GNU_SOURCE), each behind a function of our own compiled with it.
#ifndef CLINUX_H
#define CLINUX_H

#include <stdint.h>

/// sync_file_range(2)'s flags: the values of Linux's ABI.
enum {
    CLINUX_SYNC_FILE_RANGE_WAIT_BEFORE = 1,
    CLINUX_SYNC_FILE_RANGE_WRITE = 2,
    CLINUX_SYNC_FILE_RANGE_WAIT_AFTER = 4,
};

/// sync_file_range(2): starts (and with the WAIT flags, waits for) the
/// write-back of `nbytes` of `fd` from `offset`. Returns 0, or -1 with errno.
int clinux_sync_file_range(int fd, int64_t offset, int64_t nbytes, unsigned int flags);

/// ioprio_get(2) of the calling thread: its I/O priority, as the kernel's
/// value (class << 13 | level). Returns -1 with errno on failure.
int clinux_ioprio_get_thread(void);

/// ioprio_set(2) of the calling thread to `value` (class << 13 | level).
/// Returns 0, or -1 with errno.
int clinux_ioprio_set_thread(int value);

/// copy_file_range(2): copies up to `nbytes` from `in` at `*in_offset` to
/// `out` at `*out_offset` inside the kernel, advancing both offsets. Returns
/// the bytes copied (0 at the end of `in`), or -1 with errno.
int64_t clinux_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, int64_t nbytes);

#endif
