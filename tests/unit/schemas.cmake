# Schema suites (wire format) and the cross-implementation check against
# Debian's python3-msgpack. Included from tests/unit/CMakeLists.txt.
add_library(kiwi_test_schemas_samples STATIC test_schemas_samples.c)
target_link_libraries(kiwi_test_schemas_samples PUBLIC kiwi_schemas)
target_include_directories(kiwi_test_schemas_samples PUBLIC ${CMAKE_CURRENT_LIST_DIR})

foreach(msg task progress result heartbeat deadletter json robust)
  kiwi_add_test(test_schemas_${msg} LABEL unit
                SOURCES test_schemas_${msg}.c test_schemas_util.c
                LIBS kiwi_test_schemas_samples)
endforeach()

# Cross-implementation: our encoder and decoder against Debian's
# python3-msgpack (/usr/bin/python3). Fails, never skips, without it.
add_executable(kiwi-wire-tool ${CMAKE_CURRENT_LIST_DIR}/../crossimpl/wire-tool.c)
target_link_libraries(kiwi-wire-tool PRIVATE kiwi_test_schemas_samples kiwi_schemas kiwi_common)
add_test(NAME test_schemas_crossimpl
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/../crossimpl/crossimpl.py
                 $<TARGET_FILE:kiwi-wire-tool>)
set_tests_properties(test_schemas_crossimpl PROPERTIES LABELS unit TIMEOUT 120
                     SKIP_RETURN_CODE ${KIWI_TEST_SKIP_CODE})
