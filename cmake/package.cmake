# `cpack` in a build folder (scripts/test.sh package runs it): two Debian packages in
# <build>/packages/, one per install component of install.cmake:
#   kvrank_<version>_amd64.deb      the command, man page, docs; Depends from dpkg-shlibdeps
#   kvrank-dev_<version>_amd64.deb  headers, static libraries, CMake package, kvrank.pc; Depends
#                                   on the -dev packages of what those libraries link
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvrank)
set(CPACK_PACKAGE_VENDOR "The kvrank authors")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "effective rank of attention heads per layer, from transformer checkpoints")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "The kvrank authors")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME kvrank)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}
 kvrank measures how many effectively different attention heads each layer of a model has
 (MHA, GQA, MQA, MLA, LRKV), from safetensors, GGUF, NPY/NPZ checkpoints or captured
 activations, and draws per-layer effective-rank curves; `kvrank check` compares them with a
 golden file in CI.")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME kvrank-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION "kvrank as a C++ library (static, CMake and pkg-config)
 The headers and static libraries of kvrank: find_package(kvrank) and link kvrank::kvrank, or
 pkg-config --cflags --libs kvrank. examples/erank in the sources shows a consumer.")

# The Debian packages owning the library files found by hand (OpenBLAS, oneDNN: which ones, and
# which OpenBLAS build, depends on this machine), asked from dpkg: for each file as linked (its
# -dev package) or, with `resolve`, the file it points to (the run-time package).
function(kvrank_owners_of_linked_files out resolve)
  set(owners)
  find_program(dpkg_query dpkg-query)
  foreach(layer ${KVRANK_LAYERS})
    get_target_property(links kvrank_${layer} LINK_LIBRARIES)
    foreach(link ${links})
      if(IS_ABSOLUTE "${link}" AND dpkg_query)
        if(resolve)
          file(REAL_PATH "${link}" link)
        endif()
        execute_process(COMMAND ${dpkg_query} --search ${link}
          OUTPUT_VARIABLE owner OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed)
        if(NOT failed AND owner MATCHES "^([^:,]+)")
          list(APPEND owners ${CMAKE_MATCH_1})
        endif()
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES owners)
  set(${out} ${owners} PARENT_SCOPE)
endfunction()

# dpkg-shlibdeps names only "libopenblas0" for OpenBLAS, which apt satisfies with the pthreads
# build; kvrank's run-time path points at the build it was linked with (the OpenMP one), whose
# results the package check requires byte for byte. So the run-time package of each library
# found by hand is a dependency too.
kvrank_owners_of_linked_files(runtime_owners TRUE)
list(JOIN runtime_owners ", " CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS)
# The library needs the header-only -dev packages and zlib's always, plus those of the files.
kvrank_owners_of_linked_files(development_owners FALSE)
set(development_depends "libeigen3-dev (>= 3.4)" "nlohmann-json3-dev (>= 3.10)" zlib1g-dev
    ${development_owners})
list(JOIN development_depends ", " CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS)

include(CPack)
