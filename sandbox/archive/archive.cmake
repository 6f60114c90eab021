# kiwi_archive: the tar code (archive.h), one library for the sandbox drivers
# and the Firecracker guest agent (which links it statically). It needs only
# kiwi_common_base and libarchive (the tar format).
set(KIWI_ARCHIVE_SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/util.c
    ${CMAKE_CURRENT_LIST_DIR}/write.c
    ${CMAKE_CURRENT_LIST_DIR}/read.c
    ${CMAKE_CURRENT_LIST_DIR}/extract.c
    ${CMAKE_CURRENT_LIST_DIR}/meter.c)
add_library(kiwi_archive STATIC ${KIWI_ARCHIVE_SOURCES})
target_include_directories(kiwi_archive PUBLIC ${PROJECT_SOURCE_DIR})
# by -l flags, not the imported target's full path of libarchive.so, so that
# the statically linked guest agent (sandbox/firecracker/agent/) gets libarchive.a
target_link_libraries(kiwi_archive PUBLIC kiwi_common_base ${LIBARCHIVE_LDFLAGS})
target_link_libraries(kiwi_sandbox PUBLIC kiwi_archive)
