# Unit suites of repository inspection: the step-0 classifier on captured
# real output, image resolution and version ranges, install plans and the
# cache key, step 0's decisions.
kiwi_add_test(test_classify LABEL unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_classify.c LIBS kiwi_inspect)
kiwi_add_test(test_inspect LABEL unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_inspect.c LIBS kiwi_inspect)
