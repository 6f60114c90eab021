# The scripted provider as a C test helper: start/stop server.py from a test,
# read its request log. Included from tests/CMakeLists.txt; any
# test may link kiwi_scripted_provider.
if(NOT TARGET kiwi_scripted_provider)
  add_library(kiwi_scripted_provider STATIC ${CMAKE_CURRENT_LIST_DIR}/scripted-provider.c)
  target_include_directories(kiwi_scripted_provider PUBLIC ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(kiwi_scripted_provider PUBLIC kiwi_common PkgConfig::CURL PkgConfig::JANSSON)
endif()
