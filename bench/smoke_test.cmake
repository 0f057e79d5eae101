# Run by ctest (bench_smoke): rmsnorm-bench --quick over small cases must exit 0, and its --json file
# must parse and describe every case it ran, with the fields docs/benchmarks.md promises.
file(REMOVE "${JSON}")
execute_process(
  COMMAND "${BENCH}" --quick --filter f32/64x1024,f32/1x4096 --json "${JSON}"
  RESULT_VARIABLE status
  OUTPUT_VARIABLE report
  ERROR_VARIABLE progress)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "rmsnorm-bench exited with ${status}\n${progress}\n${report}")
endif()
if(NOT report MATCHES "Targets")
  message(FATAL_ERROR "the report has no targets summary:\n${report}")
endif()

file(READ "${JSON}" text)
string(JSON case_count ERROR_VARIABLE parse_error LENGTH "${text}" cases)
if(parse_error)
  message(FATAL_ERROR "${JSON} is not the expected JSON: ${parse_error}")
endif()
if(case_count LESS 1)
  message(FATAL_ERROR "${JSON} lists no cases")
endif()
string(JSON target_count LENGTH "${text}" targets)
string(JSON cpu_target GET "${text}" machine cpu_target)
math(EXPR last "${case_count} - 1")
foreach(i RANGE ${last})
  string(JSON id GET "${text}" cases ${i} id)
  string(JSON ok GET "${text}" cases ${i} ok)
  if(NOT ok)
    string(JSON error GET "${text}" cases ${i} error)
    message(FATAL_ERROR "case ${id} failed: ${error}")
  endif()
  foreach(field gbps stream_gbps fraction_of_stream threads bytes)
    string(JSON value GET "${text}" cases ${i} ${field})
    if(NOT value GREATER 0)
      message(FATAL_ERROR "case ${id}: ${field} = ${value}, expected a positive number")
    endif()
  endforeach()
  string(JSON median GET "${text}" cases ${i} time_seconds median)
endforeach()
message(STATUS "${case_count} cases, ${target_count} targets, kernels on ${cpu_target}")

# The two figures that run outside the case list: each prints its table.
foreach(figure strided quantized)
  execute_process(
    COMMAND "${BENCH}" --quick --filter ${figure}
    RESULT_VARIABLE status
    OUTPUT_VARIABLE report
    ERROR_VARIABLE progress)
  if(NOT status EQUAL 0 OR NOT report MATCHES "(PASS|MISS)")
    message(FATAL_ERROR "rmsnorm-bench --filter ${figure} exited with ${status}\n${progress}\n${report}")
  endif()
endforeach()
