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

#endif
