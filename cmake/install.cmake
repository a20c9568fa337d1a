# What `cmake --install` puts in place, in two components (the two .deb packages of package.cmake):
#   runtime      bin/kvrank, its man page, README, docs/ and the licence
#   development  include/kvrank/, the static library of every layer, the CMake package
#                (find_package(kvrank) → kvrank::kvrank) and kvrank.pc
# Included by the top-level CMakeLists.txt once every target is defined.
include(CMakePackageConfigHelpers)

set(KVRANK_LAYERS base io layout metric report plot analysis synth app)
# Dependents before their dependencies (the layer graph of CMakeLists.txt), for static linking.
set(KVRANK_LINK_ORDER app analysis synth plot report layout io metric base)
set(KVRANK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvrank)

install(TARGETS kvrank RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME copyright COMPONENT runtime)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT runtime)

# The man page, from `kvrank --help` and `--version` (Debian's help2man), when help2man is there;
# scripts/test.sh package fails when the .deb lacks it.
find_program(KVRANK_HELP2MAN help2man)
if(KVRANK_HELP2MAN)
  set(man_page ${PROJECT_BINARY_DIR}/kvrank.1)
  add_custom_command(OUTPUT ${man_page}.gz
    COMMAND ${KVRANK_HELP2MAN} --no-info --section=1 --locale=C.UTF-8
            "--name=effective rank of attention heads per layer, from checkpoints"
            --output=${man_page} $<TARGET_FILE:kvrank>
    COMMAND gzip -9nf ${man_page}
    DEPENDS kvrank
    COMMENT "Man page kvrank.1 from kvrank --help"
    VERBATIM)
  # And one page per subcommand (kvrank-analyze.1 …), from the subcommands `kvrank --help` lists.
  set(subcommand_pages ${PROJECT_BINARY_DIR}/man)
  add_custom_command(OUTPUT ${subcommand_pages}/kvrank-analyze.1.gz
    COMMAND ${CMAKE_COMMAND} -DKVRANK=$<TARGET_FILE:kvrank> -DHELP2MAN=${KVRANK_HELP2MAN}
            -DVERSION=${PROJECT_VERSION} -DOUT_DIR=${subcommand_pages}
            -P ${PROJECT_SOURCE_DIR}/cmake/subcommand_man_pages.cmake
    DEPENDS kvrank ${PROJECT_SOURCE_DIR}/cmake/subcommand_man_pages.cmake
    COMMENT "Man pages kvrank-SUBCOMMAND.1 from kvrank SUBCOMMAND --help"
    VERBATIM)
  add_custom_target(kvrank_man ALL DEPENDS ${man_page}.gz ${subcommand_pages}/kvrank-analyze.1.gz)
  install(FILES ${man_page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
  install(DIRECTORY ${subcommand_pages}/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
          COMPONENT runtime FILES_MATCHING PATTERN "kvrank-*.1.gz")
else()
  message(STATUS "kvrank: help2man not found, no man page")
endif()

# The library: every layer's static library, and kvrank_core as kvrank::kvrank over them. The
# layers' private dependencies stay private: CMake exports them as link-only ($<LINK_ONLY:…>), so
# a consumer links them but never compiles against their headers or definitions.
set_target_properties(kvrank_core PROPERTIES EXPORT_NAME kvrank)
list(TRANSFORM KVRANK_LAYERS PREPEND kvrank_ OUTPUT_VARIABLE layer_targets)
install(TARGETS ${layer_targets} kvrank_core EXPORT kvrankTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(DIRECTORY include/kvrank DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
install(EXPORT kvrankTargets NAMESPACE kvrank:: DESTINATION ${KVRANK_CMAKE_DIR}
  COMPONENT development)
configure_package_config_file(cmake/kvrankConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kvrankConfig.cmake INSTALL_DESTINATION ${KVRANK_CMAKE_DIR})
# 0.x: a minor version may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvrankConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvrankConfig.cmake ${PROJECT_BINARY_DIR}/kvrankConfigVersion.cmake
  DESTINATION ${KVRANK_CMAKE_DIR} COMPONENT development)

# kvrank.pc: the layers' libraries in link order, then what they link. Each link dependency of a
# layer is either another layer, a header-only library of Requires, a library found by hand (an
# absolute path) or one of the imported targets below; a new kind stops the configuration here
# rather than leaving kvrank.pc silently short of it.
function(kvrank_pc_link_flags out)
  set(flags)
  set(OpenMP_flags ${OpenMP_CXX_FLAGS})
  separate_arguments(OpenMP_flags)
  foreach(layer ${KVRANK_LAYERS})
    get_target_property(links kvrank_${layer} LINK_LIBRARIES)
    foreach(link ${links})
      if(link MATCHES "^kvrank_|^Eigen3::Eigen$|^nlohmann_json::nlohmann_json$")
        continue()
      elseif(IS_ABSOLUTE "${link}")
        list(APPEND flags ${link})
      elseif(link STREQUAL "ZLIB::ZLIB")
        list(APPEND flags -lz)
      elseif(link STREQUAL "Threads::Threads")
        list(APPEND flags -pthread)
      elseif(link STREQUAL "OpenMP::OpenMP_CXX")
        list(APPEND flags ${OpenMP_flags})
      else()
        message(FATAL_ERROR "cmake/install.cmake: kvrank_${layer} links ${link}; "
                            "say how kvrank.pc links it")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  list(TRANSFORM KVRANK_LINK_ORDER PREPEND -lkvrank_ OUTPUT_VARIABLE layer_flags)
  list(JOIN layer_flags " " layer_flags)
  list(JOIN flags " " flags)
  set(${out} "${layer_flags} ${flags}" PARENT_SCOPE)
endfunction()

kvrank_pc_link_flags(KVRANK_PC_LIBS)
file(RELATIVE_PATH KVRANK_PC_PREFIX_FROM_PCFILEDIR
  /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/kvrank.pc.in ${PROJECT_BINARY_DIR}/kvrank.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kvrank.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT development)
