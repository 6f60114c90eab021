target_sources(kiwi_sandbox PRIVATE ${CMAKE_CURRENT_LIST_DIR}/archive.c)
