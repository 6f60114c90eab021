# Model provider suites (models/): wire formats against golden JSON, response
# parsing, failures by name, retry-after, keys. And the scripted provider's
# own tests (its request validation, scripts, faults), with Debian's
# /usr/bin/python3 and nothing else. Included from tests/unit/CMakeLists.txt.
foreach(suite wire errors)
  kiwi_add_test(test_models_${suite} LABEL unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_models_${suite}.c
                LIBS kiwi_models)
endforeach()

add_test(NAME test_models_scripted_server
         COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/scripted_provider/test_server.py)
set_tests_properties(test_models_scripted_server PROPERTIES LABELS unit TIMEOUT 120
                     SKIP_RETURN_CODE ${KIWI_TEST_SKIP_CODE})
