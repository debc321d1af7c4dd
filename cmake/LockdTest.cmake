# lockd_add_test(): registers a C++ test binary once for every test pass.
#
#   lockd_add_test(<target>
#     LABELS <label>...          ctest labels: unit, conformance, integration, ...
#     SOURCES <file>...
#     [LIBS <library>...]        linked PRIVATE, with lockd_warnings and
#                                lockd_test_flags (LOCKD_TEST_CXX_FLAGS)
#     [TEST_NAME <name>]         one ctest test <name> running the whole binary
#                                (suites that start their servers once);
#                                without it every gtest case is a ctest test
#     [TIMEOUT <seconds>])
#
# scripts/test.sh runs every registered test in one tree (built under
# ASan+UBSan); labels select subsets for `ctest -L`.

function(lockd_add_test target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TEST_NAME;TIMEOUT" "LABELS;SOURCES;LIBS")
  if(NOT arg_LABELS OR NOT arg_SOURCES OR arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lockd_add_test(${target}): needs LABELS and SOURCES; "
                        "unexpected: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  add_executable(${target} ${arg_SOURCES})
  target_link_libraries(${target} PRIVATE ${arg_LIBS} lockd_warnings lockd_test_flags)
  set(timeout)
  if(arg_TIMEOUT)
    set(timeout TIMEOUT ${arg_TIMEOUT})
  endif()
  if(arg_TEST_NAME)
    add_test(NAME ${arg_TEST_NAME} COMMAND ${target})
    set_tests_properties(${arg_TEST_NAME} PROPERTIES LABELS "${arg_LABELS}" ${timeout})
  else()
    gtest_discover_tests(${target} PROPERTIES LABELS "${arg_LABELS}" ${timeout}
                         DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
