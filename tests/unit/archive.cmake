# test_archive: the tar writer, reader, extraction and meter (kiwi_archive,
# sandbox/archive/*.c); it reaches the internals through archive-internal.h
# and builds its hostile archives with sandbox/archive/raw.c, which only the
# tests link.
find_package(Threads REQUIRED)
kiwi_add_test(test_archive LABEL unit
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_archive.c ${PROJECT_SOURCE_DIR}/sandbox/archive/raw.c
              LIBS kiwi_archive kiwi_common Threads::Threads)
