# Runs fuzz_onnx for 5 seconds on a fresh corpus seeded with a few small models.
# -DFUZZER=... -DCORPUS=dir -DSEEDS="a|b|c"
file(REMOVE_RECURSE ${CORPUS})
file(MAKE_DIRECTORY ${CORPUS})
string(REPLACE "|" ";" _seeds "${SEEDS}")
set(_n 0)
foreach(_s ${_seeds})
  if(EXISTS ${_s})
    file(COPY_FILE ${_s} ${CORPUS}/seed${_n})
    math(EXPR _n "${_n} + 1")
  endif()
endforeach()
message(STATUS "fuzz_onnx: ${_n} seeds in ${CORPUS}")
execute_process(COMMAND ${FUZZER} -max_total_time=5 -timeout=10 -rss_limit_mb=2048 -max_len=65536 ${CORPUS}
                RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "fuzz_onnx found a problem (exit ${_rc}); the crashing input is in the working directory")
endif()
