# drkrun: runs a module (tools/drkrun.c). Included from tools/CMakeLists.txt. With the ONNX
# frontend built, it reads and writes TensorProto .pb tensors; without it, raw .bin only.
add_executable(drkrun ${CMAKE_CURRENT_LIST_DIR}/drkrun.c)
target_link_libraries(drkrun PRIVATE drkrt)
target_compile_definitions(drkrun PRIVATE DRKRUN_VERSION="${PROJECT_VERSION}")
if(TARGET drk_git_hash) # tools/CMakeLists.txt: the commit, for --version
  add_dependencies(drkrun drk_git_hash)
  target_include_directories(drkrun PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
  target_compile_definitions(drkrun PRIVATE DRK_HAVE_GIT_HASH)
endif()
if(TARGET drk_frontend)
  target_link_libraries(drkrun PRIVATE drk_frontend drk_ir)
  target_compile_definitions(drkrun PRIVATE DRK_HAVE_TENSOR_IO)
endif()
