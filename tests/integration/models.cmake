# Model providers against the scripted provider on loopback (real HTTP, real
# libcurl), and the check that the scripted provider's fixtures parse with
# the providers' official SDK types. Included from
# tests/integration/CMakeLists.txt.
include(${PROJECT_SOURCE_DIR}/tests/scripted_provider/scripted-provider.cmake)

kiwi_add_test(test_models_providers LABEL integration SOURCES test_models_providers.c
              LIBS kiwi_models kiwi_scripted_provider TIMEOUT 180)

# The SDKs live in the venv that ops/venv.sh makes (ops/setup.sh runs it).
# Without the venv the check exits 77: skipped in a developer's run, failed
# in the full suite (KIWI_REQUIRE_SERVICES=1), which never skips.
add_test(NAME test_models_fixtures_sdk
         COMMAND /bin/sh -c "py=\"\${KIWI_STATE_DIR:-/var/lib/kiwi}/venv/bin/python3\"; if [ ! -x \"$py\" ]; then [ \"\${KIWI_REQUIRE_SERVICES:-0}\" = 1 ] && { echo \"FAIL: no venv at $py: run ops/venv.sh\"; exit 1; }; echo \"SKIP: no venv at $py: run ops/venv.sh\"; exit 77; fi; exec \"$py\" \"$0\" \"$1\""
                 ${PROJECT_SOURCE_DIR}/tests/scripted_provider/check_fixtures.py
                 ${PROJECT_SOURCE_DIR}/tests/scripted_provider/scripts)
set_tests_properties(test_models_fixtures_sdk PROPERTIES LABELS integration TIMEOUT 120
                     SKIP_RETURN_CODE ${KIWI_TEST_SKIP_CODE})
