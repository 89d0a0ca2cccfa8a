# The clang++ that builds the libFuzzer targets, checked by linking an empty fuzzer with their
# -fsanitize=fuzzer,address,undefined: sets CHEXSCALE_CLANGXX, or stops the configure saying what
# to install or how to build without the fuzzers. Included by fuzz/CMakeLists.txt; also runs
# alone in an empty folder for its test: cmake [-DCHEXSCALE_CLANGXX=<c++>] -P fuzz_compiler.cmake
string(CONCAT _fuzz_fix
       "Install clang and its libFuzzer and sanitizer runtimes (Debian 12: apt-get install clang "
       "libclang-rt-14-dev, which scripts/install-deps.sh installs), or configure with "
       "-DCHEXSCALE_BUILD_FUZZ=OFF to build without the fuzz targets.")
find_program(CHEXSCALE_CLANGXX NAMES clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15
                                     clang++-14)
if(NOT CHEXSCALE_CLANGXX)
  message(FATAL_ERROR "fuzz: no clang++ found to build the libFuzzer targets "
                      "(CHEXSCALE_BUILD_FUZZ is ON). ${_fuzz_fix}")
endif()
set(_probe ${CMAKE_CURRENT_BINARY_DIR}/probe_fuzzer.cpp)
file(WRITE ${_probe}
     "#include <cstddef>\n#include <cstdint>\n"
     "extern \"C\" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }\n")
execute_process(COMMAND ${CHEXSCALE_CLANGXX} -fsanitize=fuzzer,address,undefined ${_probe}
                        -o ${CMAKE_CURRENT_BINARY_DIR}/probe_fuzzer
                RESULT_VARIABLE _probe_rc OUTPUT_QUIET ERROR_VARIABLE _probe_error)
if(NOT _probe_rc EQUAL 0)
  string(STRIP "${_probe_error}" _probe_error)
  message(FATAL_ERROR "fuzz: ${CHEXSCALE_CLANGXX} cannot link a -fsanitize=fuzzer,address,"
                      "undefined program (CHEXSCALE_BUILD_FUZZ is ON), exit ${_probe_rc}:\n"
                      "${_probe_error}\n${_fuzz_fix}")
endif()
message(STATUS "fuzz: libFuzzer targets built with ${CHEXSCALE_CLANGXX}")
