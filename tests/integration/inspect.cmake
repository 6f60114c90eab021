# The fixture corpus end to end: inspection, the real Phase A (registries
# through the CA bundle), the real Phase B and step 0, one row per case
# against tests/fixtures/repos/*/expect.json.
kiwi_add_test(test_corpus LABEL integration SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_corpus.c
              LIBS kiwi_sandbox kiwi_test_support TIMEOUT 1800)
