# The README shows examples/example.c and examples/example.cc verbatim; the tests build and run the
# files, so this keeps what readers copy the same as what is tested.
file(READ "${README}" readme)
foreach(example IN LISTS EXAMPLES)
  file(READ "${example}" code)
  string(FIND "${readme}" "${code}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md does not contain ${example} verbatim")
  endif()
endforeach()
