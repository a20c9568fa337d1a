# Run at build time (cmake -P): one man page per subcommand, kvrank-NAME.1.gz in OUT_DIR, from
# `kvrank NAME --help` through help2man. The subcommands and their summaries are read from
# `kvrank --help`, which lists the command line's table of subcommands, so a new row gets its page.
#   cmake -DKVRANK=path/to/kvrank -DHELP2MAN=path -DVERSION=x.y.z -DOUT_DIR=dir -P this file
execute_process(COMMAND ${KVRANK} --help OUTPUT_VARIABLE help RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${KVRANK} --help failed")
endif()
string(REGEX REPLACE ".*\n[Ss][Uu][Bb][Cc][Oo][Mm][Mm][Aa][Nn][Dd][Ss]:\n" "" listing "${help}")  # CLI11 2.4: SUBCOMMANDS
string(REPLACE "\n" ";" lines "${listing}")
file(MAKE_DIRECTORY ${OUT_DIR})
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^  ([a-z]+) +(.+)$")
    continue()
  endif()
  set(name ${CMAKE_MATCH_1})
  set(summary ${CMAKE_MATCH_2})
  # help2man runs a program with --help: a wrapper that is `kvrank NAME`.
  set(wrapper ${OUT_DIR}/kvrank-${name})
  file(WRITE ${wrapper} "#!/bin/sh\nexec '${KVRANK}' ${name} \"$@\"\n")
  file(CHMOD ${wrapper} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  execute_process(
    COMMAND ${HELP2MAN} --no-info --section=1 --locale=C.UTF-8 --version-string=${VERSION}
            "--name=${summary}" --output=${OUT_DIR}/kvrank-${name}.1 ${wrapper}
    RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "help2man failed for kvrank ${name}")
  endif()
  file(REMOVE ${wrapper})
  execute_process(COMMAND gzip -9nf ${OUT_DIR}/kvrank-${name}.1)
endforeach()
