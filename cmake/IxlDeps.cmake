# Optional dependencies: each has a switch IXL_WITH_<NAME>, ON by default. A build whose switch
# is ON and that lacks the dependency fails here, naming the Debian package to install; with
# -DIXL_WITH_<NAME>=OFF ixl builds without it (the feature is left out or answers
# IXL_ERR_NOT_SUPPORTED, and the tests that need it skip: a failure under CI=true).
#
# ixl_dependency(<NAME> <what it gives> MODULES <prefix:pkg-config module>...
#                PACKAGES <Debian package>...)
#
# declares the switch and, when it is ON, finds each module with pkg-config as the imported
# target PkgConfig::<prefix> (global, so tests can test for it). A new optional dependency
# (a plugin's library, say) is one call, in the CMakeLists.txt of the folder that needs it,
# before its targets:
#
#   ixl_dependency(FOO "the FOO plugin" MODULES FOO:libfoo PACKAGES libfoo-dev)
#   if(NOT IXL_WITH_FOO)
#     return()
#   endif()
#
# and its package goes into scripts/deps.sh's build list, and the switch into README.md.
function(ixl_dependency name what)
  cmake_parse_arguments(D "" "" "MODULES;PACKAGES" ${ARGN})
  option(IXL_WITH_${name} "Build ${what} (needs ${D_PACKAGES})" ON)
  if(NOT IXL_WITH_${name})
    message(STATUS "${what}: off (IXL_WITH_${name}=OFF)")
    return()
  endif()
  string(REPLACE ";" " " pkgs "${D_PACKAGES}")
  set(how "install the Debian package(s) ${pkgs} (apt-get install ${pkgs}, or: make deps), "
          "or configure with -DIXL_WITH_${name}=OFF to build without ${what}")
  find_package(PkgConfig QUIET)
  if(NOT PkgConfig_FOUND)
    message(FATAL_ERROR "IXL_WITH_${name} is ON but pkg-config is missing (apt-get install "
                        "pkg-config) to find ${D_MODULES}; or configure with "
                        "-DIXL_WITH_${name}=OFF to build without ${what}")
  endif()
  foreach(m IN LISTS D_MODULES)
    string(REPLACE ":" ";" pm "${m}")
    list(GET pm 0 prefix)
    list(GET pm 1 module)
    if(NOT TARGET PkgConfig::${prefix})
      pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
    endif()
    if(NOT TARGET PkgConfig::${prefix})
      message(FATAL_ERROR "IXL_WITH_${name} is ON (the default) but pkg-config finds no "
                          "${module} for ${what}: " ${how})
    endif()
    set(${prefix}_FOUND ${${prefix}_FOUND} PARENT_SCOPE)
    set(${prefix}_VERSION ${${prefix}_VERSION} PARENT_SCOPE)
    set(${prefix}_INCLUDE_DIRS ${${prefix}_INCLUDE_DIRS} PARENT_SCOPE)
  endforeach()
endfunction()
