# The firecracker driver's unit suites: the configuration plan against
# golden JSON, and the agent protocol with both ends talking (the agent's
# request code is compiled into the test).
set(KIWI_FC_TEST_INCLUDES ${PROJECT_SOURCE_DIR})
kiwi_add_test(test_firecracker_plan LABEL unit
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_firecracker_plan.c LIBS kiwi_sandbox)
target_include_directories(test_firecracker_plan PRIVATE ${KIWI_FC_TEST_INCLUDES})
kiwi_add_test(test_firecracker_proto LABEL unit TIMEOUT 120
              SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_firecracker_proto.c
                      ${PROJECT_SOURCE_DIR}/sandbox/firecracker/agent/agent.c
              LIBS kiwi_sandbox)
target_include_directories(test_firecracker_proto PRIVATE ${KIWI_FC_TEST_INCLUDES})
target_compile_definitions(test_firecracker_proto PRIVATE KIWI_FC_AGENT_BIN="$<TARGET_FILE:kiwi-fc-agent>")
add_dependencies(test_firecracker_proto kiwi-fc-agent)
