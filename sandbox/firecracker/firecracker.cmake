# The firecracker driver: a microVM per sandbox through Firecracker's API
# socket (fc-api.c), a guest agent over vsock (agent/, its own static
# executable kiwi-fc-agent, installed into root filesystems by
# ops/firecracker/mkrootfs.sh).
target_sources(kiwi_sandbox PRIVATE
               ${CMAKE_CURRENT_LIST_DIR}/fc-api.c
               ${CMAKE_CURRENT_LIST_DIR}/driver.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-vm.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-exec.c
               ${CMAKE_CURRENT_LIST_DIR}/driver-conn.c
               ${CMAKE_CURRENT_LIST_DIR}/agent/proto.c)
add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/agent ${CMAKE_CURRENT_BINARY_DIR}/firecracker/agent)
