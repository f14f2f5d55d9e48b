# drkrun: runs a module (tools/drkrun.c). Included from tools/CMakeLists.txt. With the ONNX
# frontend built, it reads and writes TensorProto .pb tensors; without it, raw .bin only.
add_executable(drkrun ${CMAKE_CURRENT_LIST_DIR}/drkrun.c)
target_link_libraries(drkrun PRIVATE drkrt)
target_compile_definitions(drkrun PRIVATE DRKRUN_VERSION="${PROJECT_VERSION}")
if(TARGET drk_frontend)
  target_link_libraries(drkrun PRIVATE drk_frontend drk_ir)
  target_compile_definitions(drkrun PRIVATE DRK_HAVE_TENSOR_IO)
endif()
