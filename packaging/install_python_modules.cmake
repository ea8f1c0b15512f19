# Installs DENSEFEED_PYTHON_MODULES where DENSEFEED_PYTHON imports modules
# from for the prefix being installed (CMAKE_INSTALL_PREFIX at install time,
# under DESTDIR): DENSEFEED_PYTHON_DIR when set, else what python_site_dir.py
# answers (the user site for the user base, Debian's dist-packages for
# /usr and /usr/local, PREFIX/lib/pythonX.Y/site-packages otherwise).
if(DENSEFEED_PYTHON_DIR STREQUAL "")
  execute_process(COMMAND ${DENSEFEED_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/python_site_dir.py ${CMAKE_INSTALL_PREFIX}
    OUTPUT_VARIABLE DENSEFEED_PYTHON_DIR ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "densefeed: ${DENSEFEED_PYTHON} could not say where modules go for the prefix ${CMAKE_INSTALL_PREFIX}: ${err}"
                        "(set DENSEFEED_PYTHON_SITE_DIR to a folder relative to the prefix)")
  endif()
endif()
file(INSTALL ${DENSEFEED_PYTHON_MODULES} DESTINATION "${CMAKE_INSTALL_PREFIX}/${DENSEFEED_PYTHON_DIR}")
