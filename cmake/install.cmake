# Installation: cmake --install BUILD [--prefix P] puts
#   bin/flashtune                                  the command-line tool
#   lib/libflashtune.so*, lib/libflashtune.a        the runtime library, shared and static
#   include/flashtune.h                            its API
#   lib/pkgconfig/flashtune.pc                     for pkg-config (relocatable: paths from ${pcfiledir})
#   lib/cmake/flashtune/flashtuneConfig*.cmake     for find_package(flashtune): the imported
#                                                  targets flashtune::flashtune (shared) and
#                                                  flashtune::flashtune_static
#   share/flashtune/specs/flash_fwd.lua            the default spec, as a starting point for
#                                                  one's own (the tool has it built in)
# (lib is CMAKE_INSTALL_LIBDIR: lib/<multiarch> when the prefix is /usr on Debian.)
include(CMakePackageConfigHelpers)

set(FT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashtune)

# The static archive's dependencies, as imported targets whose names go into the exported
# link interface; flashtuneConfig.cmake defines them again where the package is used.
add_library(flashtune::lua UNKNOWN IMPORTED)
set_target_properties(flashtune::lua PROPERTIES IMPORTED_LOCATION ${LUA_LIBRARY})
add_library(flashtune::sqlite3 UNKNOWN IMPORTED)
set_target_properties(flashtune::sqlite3 PROPERTIES IMPORTED_LOCATION ${SQLITE3_LIBRARY})
# NVRTC is loaded at run time (runtime/nvrtc.c): not in the link.
target_link_libraries(flashtune_static PRIVATE flashtune::lua flashtune::sqlite3 Threads::Threads ${CMAKE_DL_LIBS} m)

set_target_properties(flashtune_shared PROPERTIES EXPORT_NAME flashtune INSTALL_RPATH_USE_LINK_PATH ON)
set_target_properties(flashtune_static PROPERTIES EXPORT_NAME flashtune_static)
set_target_properties(flashtune PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS flashtune RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS flashtune_shared flashtune_static EXPORT flashtuneTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/flashtune.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/specs/flash_fwd.lua DESTINATION ${CMAKE_INSTALL_DATADIR}/flashtune/specs)

# ---- CMake package ----------------------------------------------------------------------------
# Where Lua and SQLite were found here: hints for the config file, which searches again.
get_filename_component(FT_LUA_HINT ${LUA_LIBRARY} DIRECTORY)
get_filename_component(FT_SQLITE3_HINT ${SQLITE3_LIBRARY} DIRECTORY)
get_filename_component(FT_LUA_NAME ${LUA_LIBRARY} NAME)
get_filename_component(FT_SQLITE3_NAME ${SQLITE3_LIBRARY} NAME)
install(EXPORT flashtuneTargets NAMESPACE flashtune:: DESTINATION ${FT_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/flashtuneConfig.cmake.in
  ${CMAKE_BINARY_DIR}/flashtuneConfig.cmake INSTALL_DESTINATION ${FT_CMAKE_DIR})
# 0.x: a new minor version may change the API.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/flashtuneConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/flashtuneConfig.cmake ${CMAKE_BINARY_DIR}/flashtuneConfigVersion.cmake
  DESTINATION ${FT_CMAKE_DIR})

# ---- pkg-config -------------------------------------------------------------------------------
# Paths relative to the .pc file, so that `cmake --install --prefix P` anywhere works.
function(ft_pc_dir var dir)
  if(IS_ABSOLUTE "${dir}")
    set(${var} "${dir}" PARENT_SCOPE)
  else()
    set(${var} "\${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(FT_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH FT_PC_UP "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" FT_PC_UP "${FT_PC_UP}")
  set(FT_PC_PREFIX "\${pcfiledir}/${FT_PC_UP}")
endif()
ft_pc_dir(FT_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
ft_pc_dir(FT_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")

# Libs.private: what linking libflashtune.a needs besides it (-L only outside the
# compiler's own directories).
set(FT_PC_LIBS_PRIVATE "")
foreach(lib ${LUA_LIBRARY} ${SQLITE3_LIBRARY})
  get_filename_component(dir ${lib} DIRECTORY)
  get_filename_component(name ${lib} NAME)
  string(REGEX REPLACE "^lib(.*)\\.(so|a)(\\..*)?$" "\\1" name "${name}") # liblua5.4.so -> lua5.4
  list(FIND CMAKE_C_IMPLICIT_LINK_DIRECTORIES "${dir}" implicit)
  if(implicit LESS 0)
    string(APPEND FT_PC_LIBS_PRIVATE " -L${dir}")
  endif()
  string(APPEND FT_PC_LIBS_PRIVATE " -l${name}")
endforeach()
string(APPEND FT_PC_LIBS_PRIVATE " ${CMAKE_THREAD_LIBS_INIT}")
foreach(lib ${CMAKE_DL_LIBS} m)
  string(APPEND FT_PC_LIBS_PRIVATE " -l${lib}")
endforeach()
string(STRIP "${FT_PC_LIBS_PRIVATE}" FT_PC_LIBS_PRIVATE)
string(REGEX REPLACE "  +" " " FT_PC_LIBS_PRIVATE "${FT_PC_LIBS_PRIVATE}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/flashtune.pc.in ${CMAKE_BINARY_DIR}/flashtune.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/flashtune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
