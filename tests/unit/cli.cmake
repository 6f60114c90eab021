# Suites of the kiwi command (producer/): settings, task input, batch
# lines, CI events and webhook signatures, the HTTP parser and server, the
# JSON renderer, options and help. Included from tests/unit/CMakeLists.txt
# after schemas.cmake (test_cli_render uses its sample messages).
foreach(suite settings task batch ci http opts watch fleet)
  kiwi_add_test(test_cli_${suite} LABEL unit SOURCES test_cli_${suite}.c LIBS kiwi_cli)
endforeach()
kiwi_add_test(test_cli_render LABEL unit SOURCES test_cli_render.c LIBS kiwi_cli kiwi_test_schemas_samples)
kiwi_add_test(test_settings LABEL unit SOURCES test_settings.c LIBS kiwi_worker_lib kiwi_cli)
