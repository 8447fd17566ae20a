#ifndef CVERSION_H
#define CVERSION_H

/// This build's version: the VERSION file's, as Package.swift read it.
const char *coffee_tracker_version(void);

#endif
