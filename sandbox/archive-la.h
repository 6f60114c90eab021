/*
 * archive-la.h: libarchive's <archive.h> and <archive_entry.h> for the tar
 * code. Kiwi's own sandbox/archive.h has the same name and comes first on
 * the include path, so libarchive's header is included by the full path
 * CMake found it at (KIWI_LIBARCHIVE_H, sandbox/archive.cmake).
 */
#ifndef KIWI_SANDBOX_ARCHIVE_LA_H
#define KIWI_SANDBOX_ARCHIVE_LA_H

#include KIWI_LIBARCHIVE_H
#include <archive_entry.h>

#endif
