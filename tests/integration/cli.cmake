# Integration suites of the kiwi command against the real broker: they run
# the built `kiwi` (KIWI_CLI_BIN) and check the topics with librdkafka
# directly. Included from tests/integration/CMakeLists.txt.
add_library(kiwi_test_cli_util STATIC test_cli_util.c)
target_link_libraries(kiwi_test_cli_util PUBLIC kiwi_test_support PkgConfig::RDKAFKA)
target_compile_definitions(kiwi_test_cli_util PUBLIC KIWI_CLI_BIN="$<TARGET_FILE:kiwi>")
target_include_directories(kiwi_test_cli_util PUBLIC ${CMAKE_CURRENT_LIST_DIR})
add_dependencies(kiwi_test_cli_util kiwi)

foreach(suite submit batch ci tail wait watch fleet)
  kiwi_add_test(test_cli_stack_${suite} LABEL integration SOURCES test_cli_stack_${suite}.c
                LIBS kiwi_test_cli_util kiwi_cli kiwi_test_schemas_samples PkgConfig::CURL TIMEOUT 300)
endforeach()
