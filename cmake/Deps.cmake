# Dependencies come from Debian packages (see .ci/run) and the CUDA toolkit; nothing is fetched.
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
# Only the CUDA headers (cuda.h, nvrtc.h) are used at build time: libcuda and libnvrtc are
# dlopen()ed at run time so that the binary starts on a machine with no driver.
find_package(CUDAToolkit REQUIRED)
if(MOETUNE_TESTS)
  find_package(GTest REQUIRED)
endif()
