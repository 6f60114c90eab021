# sandbox/inspect.cmake: repository inspection (image, install command by
# lockfile, cache key), the step-0 classifier and step 0 itself.
#
# Two data files are compiled in, so a worker needs no file beside its
# binary: the classifier's table (classify.tsv) and the default image
# catalogue (ops/images/catalog.default.tsv). CMake re-runs when either
# changes.
function(kiwi_embed_file name in out)
  file(READ ${in} hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR len "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)"
         "\\1\n    " bytes "${bytes}")
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${in})
  set(text "/* Generated from ${rel} by sandbox/inspect.cmake. Do not edit. */\n#include <stddef.h>\n")
  string(APPEND text "const unsigned char ${name}[] = {\n    ${bytes}0x00\n};\n")
  string(APPEND text "const size_t ${name}_len = ${len};\n")
  if(EXISTS ${out})
    file(READ ${out} old)
  endif()
  if(NOT "${old}" STREQUAL "${text}")
    file(WRITE ${out} "${text}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${in})
endfunction()

kiwi_embed_file(kiwi__classify_tsv ${CMAKE_CURRENT_LIST_DIR}/classify.tsv
                ${CMAKE_CURRENT_BINARY_DIR}/classify-table.c)
kiwi_embed_file(kiwi__catalog_default_tsv ${CMAKE_SOURCE_DIR}/ops/images/catalog.default.tsv
                ${CMAKE_CURRENT_BINARY_DIR}/catalog-default.c)

target_sources(kiwi_sandbox PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/inspect.c
  ${CMAKE_CURRENT_LIST_DIR}/inspect-util.c
  ${CMAKE_CURRENT_LIST_DIR}/inspect-ctx.c
  ${CMAKE_CURRENT_LIST_DIR}/runtime.c
  ${CMAKE_CURRENT_LIST_DIR}/image-catalog.c
  ${CMAKE_CURRENT_LIST_DIR}/image-command.c
  ${CMAKE_CURRENT_LIST_DIR}/image-markers.c
  ${CMAKE_CURRENT_LIST_DIR}/image-resolve.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile-node.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile-node-members.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile-python.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile-jvm.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile-simple.c
  ${CMAKE_CURRENT_LIST_DIR}/lockfile-input.c
  ${CMAKE_CURRENT_LIST_DIR}/classify.c
  ${CMAKE_CURRENT_LIST_DIR}/step0.c
  ${CMAKE_CURRENT_BINARY_DIR}/classify-table.c
  ${CMAKE_CURRENT_BINARY_DIR}/catalog-default.c)
