#ifndef CARCHIVE_SHIM_H
#define CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#endif
