# test_archive: the tar writer and reader (sandbox/archive.c). archive.c is
# compiled into the test itself, so the suite does not depend on when
# kiwi_sandbox starts including sandbox/archive.cmake.
find_package(Threads REQUIRED)
kiwi_add_test(test_archive LABEL unit
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_archive.c ${PROJECT_SOURCE_DIR}/sandbox/archive.c
              LIBS kiwi_common Threads::Threads)
target_include_directories(test_archive PRIVATE ${PROJECT_SOURCE_DIR}/sandbox)
