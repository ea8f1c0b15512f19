# Writes OUTPUT with what `EXE --generate WHAT` prints (the man page or a
# shell completion script); fails the build when densefeed fails.
get_filename_component(dir ${OUTPUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
execute_process(COMMAND ${EXE} --generate ${WHAT} OUTPUT_FILE ${OUTPUT}.tmp RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUTPUT}.tmp)
  message(FATAL_ERROR "${EXE} --generate ${WHAT} exited ${rc}")
endif()
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
