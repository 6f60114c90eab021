# test_firecracker_api: the firecracker driver's configuration sequence
# against Firecracker's published API contract (the test binary serves it)
# and against the real binary when one is installed (KIWI_TEST_FIRECRACKER
# or `firecracker` in PATH), up to InstanceStart without KVM. Needs root.
kiwi_add_test(test_firecracker_api LABEL integration
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_firecracker_api.c LIBS kiwi_sandbox kiwi_test_support
              TIMEOUT 300)
