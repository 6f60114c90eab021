# The fixture corpus end to end: inspection, the real Phase A (registries
# through the CA bundle), the real Phase B and step 0, one row per case
# against tests/fixtures/repos/*/expect.json.
kiwi_add_test(test_corpus LABEL integration SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_corpus.c
              LIBS kiwi_sandbox kiwi_test_sandbox_env kiwi_test_support TIMEOUT 1800)
# The same corpus under gVisor: every case passes under runsc as under runc
# (Phase A under runsc-net, gVisor's own network stack; Phase B under runsc
# with no network). Label release-only: tests/run.sh leaves it out of the
# sanitizer stage, where test_corpus already runs the same C code under
# ASan+UBSan and a second corpus would add ten minutes and no finding.
add_test(NAME test_corpus_runsc COMMAND test_corpus)
set_tests_properties(test_corpus_runsc PROPERTIES LABELS "integration;release-only" TIMEOUT 1800
                     SKIP_RETURN_CODE ${KIWI_TEST_SKIP_CODE} ENVIRONMENT "KIWI_SANDBOX_RUNTIME=runsc")
