# cmake -DCLANG_FORMAT=... -DROOT=... -P format_check.cmake
# Fails when any C/C++ file under core/ server/ clients/ tests/ bench/ proto/
# differs from what clang-format makes of it (.clang-format at ROOT).
file(GLOB_RECURSE files RELATIVE ${ROOT}
     ${ROOT}/core/*.c ${ROOT}/core/*.h ${ROOT}/server/*.c ${ROOT}/server/*.h
     ${ROOT}/clients/*.c ${ROOT}/clients/*.h ${ROOT}/tests/*.c ${ROOT}/tests/*.h
     ${ROOT}/bench/*.c ${ROOT}/bench/*.h ${ROOT}/bench/*.cpp ${ROOT}/proto/*.c ${ROOT}/proto/*.h)
list(FILTER files EXCLUDE REGEX "\\.pb-c\\.[ch]$")
list(LENGTH files n)
if(n LESS 50)
  message(FATAL_ERROR "format_check: found only ${n} source files under ${ROOT}")
endif()
set(bad "")
foreach(f ${files})
  execute_process(COMMAND ${CLANG_FORMAT} --dry-run -Werror ${f} WORKING_DIRECTORY ${ROOT}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND bad ${f})
  endif()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " badlist "${bad}")
  message(FATAL_ERROR "format_check: these files differ from .clang-format (run clang-format -i on them):\n  ${badlist}")
endif()
message(STATUS "format_check: ${n} files follow .clang-format")
