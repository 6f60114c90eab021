/*
 * archive-la.h: libarchive's <archive.h> and <archive_entry.h> for the tar
 * code. Kiwi's own header of that name is "sandbox/archive/archive.h", named from
 * the source root, so <archive.h> is libarchive's.
 */
#ifndef KIWI_SANDBOX_ARCHIVE_LA_H
#define KIWI_SANDBOX_ARCHIVE_LA_H

#include <archive.h>
#include <archive_entry.h>

#endif
