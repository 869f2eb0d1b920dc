# ixl_add_plugin(NAME <name> SOURCES <files...> [BUILTIN] [LIBS <libs...>]
#                [OUTPUT_DIR <dir>] [NO_INSTALL])
#
# BUILTIN compiles the plugin into libixl (its entry becomes ixl_plugin_builtin_<name>, listed
# in the generated table of built-in plugins); otherwise it is a dynamic plugin
# libixl_plugin_<name>.so in the build tree's lib/plugins (or OUTPUT_DIR), installed into the
# plugin directory. A plugin sees include/ixl only.
function(ixl_add_plugin)
  cmake_parse_arguments(P "BUILTIN;NO_INSTALL" "NAME;OUTPUT_DIR" "SOURCES;LIBS;INCLUDES" ${ARGN})
  if(P_BUILTIN)
    set(t ixl_builtin_${P_NAME})
    add_library(${t} OBJECT ${P_SOURCES})
    target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/include ${P_INCLUDES})
    target_compile_definitions(${t} PRIVATE IXL_PLUGIN_BUILTIN_NAME=${P_NAME})
    target_compile_options(${t} PRIVATE -fvisibility=hidden)
    set_property(GLOBAL APPEND PROPERTY IXL_BUILTIN_NAMES ${P_NAME})
    set_property(GLOBAL APPEND PROPERTY IXL_BUILTIN_TARGETS ${t})
    set_property(GLOBAL APPEND PROPERTY IXL_BUILTIN_LIBS ${P_LIBS})
  else()
    set(t ixl_plugin_${P_NAME})
    add_library(${t} MODULE ${P_SOURCES})
    target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/include ${P_INCLUDES})
    target_compile_options(${t} PRIVATE -fvisibility=hidden)
    target_link_libraries(${t} PRIVATE ${P_LIBS})
    if(NOT P_OUTPUT_DIR)
      set(P_OUTPUT_DIR ${IXL_PLUGIN_BUILD_DIR})
    endif()
    set_target_properties(${t} PROPERTIES PREFIX "lib" OUTPUT_NAME "ixl_plugin_${P_NAME}"
                          LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIR})
    if(NOT P_NO_INSTALL)
      install(TARGETS ${t} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/ixl/plugins)
      set_property(GLOBAL APPEND PROPERTY IXL_INSTALLED_PLUGINS ${t})
    endif()
  endif()
endfunction()
