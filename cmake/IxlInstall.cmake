# `make install` (cmake --install): what an installed ixl is, under CMAKE_INSTALL_PREFIX (the
# Makefile's PREFIX) and DESTDIR:
#
#   lib/libixl.so.<VERSION>, lib/libixl.so.<major> (the SONAME), lib/libixl.so (for -lixl)
#   lib/ixl/plugins/libixl_plugin_<NAME>.so   the dynamic plugins (cmake/IxlPlugin.cmake)
#   lib/pkgconfig/ixl.pc                       pkg-config --cflags --libs ixl
#   lib/cmake/ixl/ixl{Config,ConfigVersion,Targets,Targets-<config>}.cmake
#                                              find_package(ixl CONFIG): ixl::ixl
#   include/ixl/{ixl,ixl_plugin,ixl_types}.h
#   bin/ixl-info, bin/ixlbench
#   share/man/man1/{ixl-info,ixlbench}.1, share/man/man3/ixl.3   (docs/man)
#
# (lib is CMAKE_INSTALL_LIBDIR: lib/<multiarch triplet> for the prefix /usr on Debian.) The
# target ixl_install_targets builds what is installed and nothing else (the Makefile's install
# builds it, not the tests): a target installed elsewhere joins it with add_dependencies.
include(CMakePackageConfigHelpers)

set(IXL_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ixl)
set(IXL_PLUGIN_INSTALL_RELDIR ${CMAKE_INSTALL_LIBDIR}/ixl/plugins)

install(TARGETS ixl EXPORT ixlTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/ixl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config: paths from ${prefix}, so --define-prefix and PKG_CONFIG_SYSROOT_DIR (a DESTDIR
# tree) work. No Requires.private / Libs.private: only the shared library is installed, and
# its own dependencies are in its DT_NEEDED; the headers include nothing of theirs.
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(IXL_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(IXL_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
configure_file(cmake/ixl.pc.in ${CMAKE_BINARY_DIR}/ixl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ixl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The CMake package: find_package(ixl 0.2 CONFIG) gives ixl::ixl and ixl_PLUGIN_DIR; any 0.m
# with m >= the requested minor is accepted (SameMajorVersion; docs/abi.md).
install(EXPORT ixlTargets NAMESPACE ixl:: DESTINATION ${IXL_CMAKE_INSTALL_DIR})
configure_package_config_file(cmake/ixlConfig.cmake.in ${CMAKE_BINARY_DIR}/ixlConfig.cmake
                              INSTALL_DESTINATION ${IXL_CMAKE_INSTALL_DIR}
                              PATH_VARS IXL_PLUGIN_INSTALL_RELDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/ixlConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/ixlConfig.cmake ${CMAKE_BINARY_DIR}/ixlConfigVersion.cmake
        DESTINATION ${IXL_CMAKE_INSTALL_DIR})

# Man pages (roff, docs/man/*.in, the version filled in: build/man): the tools' and the API
# overview.
foreach(page ixl-info.1 ixlbench.1 ixl.3)
  configure_file(docs/man/${page}.in ${CMAKE_BINARY_DIR}/man/${page} @ONLY)
  string(REGEX REPLACE ".*\\." "" section ${page})
  install(FILES ${CMAKE_BINARY_DIR}/man/${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
endforeach()

add_custom_target(ixl_install_targets)
get_property(IXL_INSTALLED_PLUGINS GLOBAL PROPERTY IXL_INSTALLED_PLUGINS)
add_dependencies(ixl_install_targets ixl ixl-info ixlbench ${IXL_INSTALLED_PLUGINS})
