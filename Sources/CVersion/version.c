#include "cversion.h"

#ifndef COFFEE_TRACKER_VERSION
#error "COFFEE_TRACKER_VERSION comes from Package.swift, which reads the VERSION file"
#endif

const char *coffee_tracker_version(void) { return COFFEE_TRACKER_VERSION; }
