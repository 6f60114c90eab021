# test_hostile: the hostile repositories of tests/fixtures/hostile through
# the real driver under runc and runsc (sandbox isolation, resource bounds,
# files in and out). Needs root (network namespaces, loop mounts) and the
# stack's dockerd; the metadata test needs ops/egress/egress.sh.
find_package(Threads REQUIRED)
kiwi_add_test(test_hostile LABEL integration SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_hostile.c
              LIBS kiwi_sandbox kiwi_test_support Threads::Threads TIMEOUT 1800)
