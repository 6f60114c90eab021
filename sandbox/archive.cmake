# kiwi_archive: the tar code (archive.h), one library for the sandbox drivers
# and the Firecracker guest agent (which links it statically). It needs only
# kiwi_common_base.
add_library(kiwi_archive STATIC ${CMAKE_CURRENT_LIST_DIR}/archive.c)
target_include_directories(kiwi_archive PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(kiwi_archive PUBLIC kiwi_common_base)
target_link_libraries(kiwi_sandbox PUBLIC kiwi_archive)
