# Link hygiene for binaries carried to another Linux image (the GPU machine): libstdc++ and
# libgcc are linked statically, so an executable needs no shared library beyond libc, libm and
# the loader (libcuda, libnvrtc and libnvidia-ml are dlopen()ed at run time, never linked).
# bench/scripts/check_ldd.sh checks the result.
option(MOETUNE_STATIC_RUNTIME "Link libstdc++/libgcc statically into executables" ON)

# moetune_static_runtime(target): the same flags on one executable (when the global option is OFF).
function(moetune_static_runtime target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()

if(MOETUNE_STATIC_RUNTIME AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  string(APPEND CMAKE_EXE_LINKER_FLAGS " -static-libstdc++ -static-libgcc")
endif()
