# drkc_add_model(): compile a model at build time into a static library an app links.
#
#   drkc_add_model(TARGET name MODEL model.onnx TARGETS sm_87 sm_90a
#                  [PRECISION fp16] [HOST aarch64-linux-gnu] [NAME api_name] [OPTIONS drkc options...])
#
# Runs `drkc MODEL -c` into ${CMAKE_CURRENT_BINARY_DIR}/drkc/<name>/: <api>.o (the module
# embedded in an object for HOST) and <api>.h (the typed C API <api>_create/_run/_destroy;
# <api> is NAME, default the target's name with every non-identifier character made '_').
# The library `name` holds the object, puts the header's folder on its users' include path
# and links drkc::drkrt. The compile reruns when the model file or drkc changes.
#
# HOST defaults to the machine CMake builds for: aarch64-linux-gnu when CMAKE_SYSTEM_PROCESSOR
# is aarch64/arm64 (a cross build with a toolchain file), else x86_64-linux-gnu. drkc runs on
# the build machine: DRKC_EXECUTABLE if set, else drkc::drkc from this package when it is not
# a cross build, else `drkc` on the build machine's PATH.
function(drkc_add_model)
  cmake_parse_arguments(A "" "TARGET;MODEL;PRECISION;HOST;NAME" "TARGETS;OPTIONS" ${ARGN})
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "drkc_add_model: unknown arguments: ${A_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT A_TARGET OR NOT A_MODEL OR NOT A_TARGETS)
    message(FATAL_ERROR "drkc_add_model needs TARGET, MODEL and TARGETS (e.g. TARGETS sm_90a)")
  endif()
  get_filename_component(_model "${A_MODEL}" ABSOLUTE)
  if(NOT EXISTS "${_model}")
    message(FATAL_ERROR "drkc_add_model(${A_TARGET}): no model file ${_model}")
  endif()
  # drkc, on the build machine
  if(DRKC_EXECUTABLE)
    set(_drkc "${DRKC_EXECUTABLE}")
    set(_drkc_dep "${DRKC_EXECUTABLE}")
  elseif(TARGET drkc::drkc AND NOT CMAKE_CROSSCOMPILING)
    set(_drkc "$<TARGET_FILE:drkc::drkc>")
    set(_drkc_dep "$<TARGET_FILE:drkc::drkc>")
  else()
    find_program(DRKC_EXECUTABLE drkc NO_CMAKE_FIND_ROOT_PATH)
    if(NOT DRKC_EXECUTABLE)
      message(FATAL_ERROR "drkc_add_model: drkc not found; set DRKC_EXECUTABLE to the compiler on this machine")
    endif()
    set(_drkc "${DRKC_EXECUTABLE}")
    set(_drkc_dep "${DRKC_EXECUTABLE}")
  endif()
  if(NOT A_HOST)
    if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
      set(A_HOST aarch64-linux-gnu)
    else()
      set(A_HOST x86_64-linux-gnu)
    endif()
  endif()
  if(A_NAME)
    set(_name "${A_NAME}")
  else()
    string(MAKE_C_IDENTIFIER "${A_TARGET}" _name)
  endif()
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/drkc/${A_TARGET}")
  set(_obj "${_dir}/${_name}.o")
  set(_hdr "${_dir}/${_name}.h")
  list(JOIN A_TARGETS "," _targets)
  set(_args "${_model}" "--target=${_targets}" -c "--host=${A_HOST}" "--name=${_name}" -o "${_obj}" -q)
  if(A_PRECISION)
    list(APPEND _args "--precision=${A_PRECISION}")
  endif()
  list(APPEND _args ${A_OPTIONS})
  file(MAKE_DIRECTORY "${_dir}")
  add_custom_command(OUTPUT "${_obj}" "${_hdr}"
                     COMMAND ${_drkc} ${_args}
                     DEPENDS "${_model}" "${_drkc_dep}"
                     WORKING_DIRECTORY "${_dir}"
                     COMMENT "drkc: ${A_MODEL} -> ${_name}.o, ${_name}.h (${_targets}, host ${A_HOST})"
                     VERBATIM)
  set_source_files_properties("${_obj}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  # the header is a source too, so it exists before any user of the library compiles
  add_library(${A_TARGET} STATIC "${_obj}" "${_hdr}")
  set_target_properties(${A_TARGET} PROPERTIES LINKER_LANGUAGE C)
  target_include_directories(${A_TARGET} PUBLIC "${_dir}")
  target_link_libraries(${A_TARGET} PUBLIC drkc::drkrt)
endfunction()
