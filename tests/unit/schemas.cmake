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
