# moetune_library(NAME SOURCES ... [DEPS ...]): one static library per concern folder.
function(moetune_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  # Several people edit folders in parallel: a listed source that does not exist yet is reported
  # and left out, so one folder mid-edit does not stop the others from configuring.
  set(srcs)
  foreach(s IN LISTS ARG_SOURCES)
    if(IS_ABSOLUTE ${s} OR EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${s})
      list(APPEND srcs ${s})
    else()
      message(WARNING "${name}: source ${s} does not exist; left out")
    endif()
  endforeach()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                     PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE moetune_warnings)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
