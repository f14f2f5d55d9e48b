# `cmake --install`: drkc and drkrun, libdrkrt (static and shared) with its header, the CMake
# package (find_package(drkc): drkc::drkrt, drkc::drkrt_shared, drkc::drkc, drkc_add_model)
# and a pkg-config file (drkrt.pc). docs/deploy.md says how an application uses them. A
# runtime-only build (DRK_RUNTIME_ONLY, e.g. the aarch64 cross build) installs the same minus
# drkc.
include(CMakePackageConfigHelpers)
set(DRK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/drkc)
set(_drk_install_targets drkrt drkrt_shared drkrun)
if(TARGET drkc)
  list(APPEND _drk_install_targets drkc)
endif()
target_include_directories(drkrt INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(drkrt_shared INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS ${_drk_install_targets} EXPORT drkcTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/runtime/include/drk/drkrt.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/drk)
install(EXPORT drkcTargets NAMESPACE drkc:: DESTINATION ${DRK_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/drkcConfig.cmake.in ${CMAKE_BINARY_DIR}/drkcConfig.cmake
                              INSTALL_DESTINATION ${DRK_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/drkcConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/drkcConfig.cmake ${CMAKE_BINARY_DIR}/drkcConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/drkcAddModel.cmake DESTINATION ${DRK_CMAKE_DIR})
# pkg-config: `cc app.c model.o $(pkg-config --cflags --libs drkrt)` (shared), --static for libdrkrt.a
file(RELATIVE_PATH DRK_PC_TO_PREFIX /x/${CMAKE_INSTALL_LIBDIR}/pkgconfig /x) # ../.. (or ../../.. for lib/<multiarch>)
configure_file(${CMAKE_SOURCE_DIR}/cmake/drkrt.pc.in ${CMAKE_BINARY_DIR}/drkrt.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/drkrt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
