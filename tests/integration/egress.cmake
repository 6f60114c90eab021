# The egress layer's integration tests (ops/egress/): included from
# tests/integration/CMakeLists.txt. Both need root, dockerd and the
# kiwi/base:bookworm image; they change the host's iptables while they run,
# so they run alone (RUN_SERIAL) and hold /run/kiwi-netns.lock.

# test_egress: egress.sh apply/remove/status/check and verify.sh, in network
# namespaces the test creates (TAP output; exit 77 = skipped).
# Under timeout(1): SIGTERM after 600 s runs its clean-up (rules removed,
# namespaces deleted), which ctest's SIGKILL at TIMEOUT would not.
add_test(NAME test_egress COMMAND timeout --verbose --signal=TERM --kill-after=60 600
                                  bash ${CMAKE_CURRENT_LIST_DIR}/test_egress.sh)
set_tests_properties(test_egress PROPERTIES
  LABELS integration
  TIMEOUT 690
  RUN_SERIAL TRUE
  SKIP_RETURN_CODE ${KIWI_TEST_SKIP_CODE}
  ENVIRONMENT "KIWI_EGRESS_DIR=${PROJECT_SOURCE_DIR}/ops/egress")

# test_egress_proxy: egress.sh --proxy and proxy.sh (Squid) on a Docker
# network of its own, from runc and runsc-net containers, against an
# outside namespace the test creates (TAP output; exit 77 = skipped).
add_test(NAME test_egress_proxy COMMAND timeout --verbose --signal=TERM --kill-after=60 600
                                        bash ${CMAKE_CURRENT_LIST_DIR}/test_egress_proxy.sh)
set_tests_properties(test_egress_proxy PROPERTIES
  LABELS integration
  TIMEOUT 690
  RUN_SERIAL TRUE
  SKIP_RETURN_CODE ${KIWI_TEST_SKIP_CODE}
  ENVIRONMENT "KIWI_EGRESS_DIR=${PROJECT_SOURCE_DIR}/ops/egress")

# kiwi_test_netns: tests/support/netns.c, namespaces with a veth, routed
# addresses, the route-safety check and fake HTTP/DNS services, for any test
# that must send to 169.254.169.254 without a packet leaving the machine.
add_library(kiwi_test_netns STATIC ${PROJECT_SOURCE_DIR}/tests/support/netns.c)
target_include_directories(kiwi_test_netns PUBLIC ${PROJECT_SOURCE_DIR}/tests/support)

# test_egress_netns: the helper itself, and the rules through it.
kiwi_add_test(test_egress_netns LABEL integration SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_egress_netns.c
              LIBS kiwi_test_netns kiwi_test_support TIMEOUT 300)
set_tests_properties(test_egress_netns PROPERTIES RUN_SERIAL TRUE)
