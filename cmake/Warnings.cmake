# Warnings ride an INTERFACE target that every moetune target links.
add_library(moetune_warnings INTERFACE)
target_compile_options(moetune_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(MOETUNE_WERROR)
  target_compile_options(moetune_warnings INTERFACE -Werror)
endif()
