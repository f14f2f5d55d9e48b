# Writes OUT (a header defining DRK_GIT_HASH) from `git describe` of SRC at build time, and
# touches it only when the text changes, so a commit rebuilds only what prints the version.
# cmake -DSRC=dir -DOUT=file -P git_hash.cmake
execute_process(COMMAND git -C ${SRC} rev-parse --short=12 HEAD OUTPUT_VARIABLE _h ERROR_QUIET
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0 OR _h STREQUAL "")
  set(_h "unknown")
else()
  execute_process(COMMAND git -C ${SRC} status --porcelain --untracked-files=no OUTPUT_VARIABLE _dirty ERROR_QUIET)
  if(NOT _dirty STREQUAL "")
    string(APPEND _h "-dirty")
  endif()
endif()
set(_text "#define DRK_GIT_HASH \"${_h}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} _old)
endif()
if(NOT _old STREQUAL _text)
  file(WRITE ${OUT} "${_text}")
endif()
