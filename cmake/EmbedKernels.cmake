# Executables link libstdc++/libgcc statically (cmake/Static.cmake), included here so that
# every target defined after include(EmbedKernels) gets it.
include(Static)

# Embeds every file under kernels/ into the binary as a C++ string, with a SHA-256 of all of
# them together (the kernel source hash that keys the JIT cache and every record).
# Generates ${CMAKE_BINARY_DIR}/generated/kernels_embedded.cpp, defining the table declared in
# src/cuda/kernel_sources.hpp.
function(moetune_embed_kernels out_var)
  set(kdir ${PROJECT_SOURCE_DIR}/kernels)
  file(GLOB_RECURSE kfiles CONFIGURE_DEPENDS RELATIVE ${kdir} ${kdir}/*.cuh ${kdir}/*.h)
  list(SORT kfiles)
  set(out ${CMAKE_BINARY_DIR}/generated/kernels_embedded.cpp)
  set(deps)
  foreach(f IN LISTS kfiles)
    list(APPEND deps ${kdir}/${f})
  endforeach()
  # The file list travels as one argument, '|'-separated (a ';' would split the shell command).
  string(REPLACE ";" "|" kfiles_arg "${kfiles}")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DKDIR=${kdir} -DOUT=${out} "-DFILES=${kfiles_arg}"
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedKernelsScript.cmake
    DEPENDS ${deps} ${PROJECT_SOURCE_DIR}/cmake/EmbedKernelsScript.cmake
    COMMENT "Embedding kernels/ into the binary"
    VERBATIM)
  set(${out_var} ${out} PARENT_SCOPE)
endfunction()
