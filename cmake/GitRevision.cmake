# Script mode (cmake -P), run at every build by util/CMakeLists.txt: writes
# OUT (version_info.cc) with the project's version and the git revision of
# SOURCE_DIR, rewriting it only when either changed (configure_file), so an
# unchanged revision relinks nothing. REVISION, if set, is used instead of
# asking git (a build from a source tarball: -DLOCKD_GIT_REVISION=...);
# without git or a repository the revision is "unknown".
if(REVISION MATCHES "^[0-9a-f]{40}$")
  string(SUBSTRING "${REVISION}" 0 12 LOCKD_GIT_REVISION)  # a full hash: short, as git's
elseif(REVISION)
  set(LOCKD_GIT_REVISION "${REVISION}")
else()
  execute_process(
    COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
    OUTPUT_VARIABLE LOCKD_GIT_REVISION
    RESULT_VARIABLE rc
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT rc EQUAL 0 OR LOCKD_GIT_REVISION STREQUAL "")
    set(LOCKD_GIT_REVISION unknown)
  endif()
endif()
set(LOCKD_VERSION "${VERSION}")
configure_file("${TEMPLATE}" "${OUT}" @ONLY)
