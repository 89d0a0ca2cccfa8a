# Helpers that give every module and test the same flags, precompiled header and layout.

# One precompiled header for LibTorch, compiled once and reused by every target.
add_library(chexscale_pch OBJECT ${CMAKE_SOURCE_DIR}/src/common/pch.cpp)
# Same compile definitions as the targets that reuse it (fmt/spdlog add -D flags), so the PCH stays
# valid for all of them; CLI11 (header-only, no definitions) is for the cli's targets.
target_link_libraries(chexscale_pch PUBLIC chexscale_torch CLI11::CLI11 nlohmann_json::nlohmann_json
  spdlog::spdlog fmt::fmt yaml-cpp)
# Included by a path relative to src/ (not the absolute one CMake writes for a file path), so the
# generated cmake_pch.hxx has the same bytes in every checkout: ccache (base_dir) then shares the
# header and every object built on it between clones at different paths and the image's build.
target_include_directories(chexscale_pch PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_precompile_headers(chexscale_pch PRIVATE [["common/pch.h"]])

# chexscale_add_module(NAME <module> SOURCES ... DEPS ...): static library chexscale_<module>.
function(chexscale_add_module)
  cmake_parse_arguments(M "" "NAME" "SOURCES;DEPS" ${ARGN})
  set(target chexscale_${M_NAME})
  add_library(${target} STATIC ${M_SOURCES})
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC chexscale_torch ${M_DEPS})
  target_precompile_headers(${target} REUSE_FROM chexscale_pch)
  set_property(GLOBAL APPEND PROPERTY CHEXSCALE_MODULES ${target})
endfunction()

# chexscale_add_test(NAME <exe> SOURCES ... DEPS ... [TIMEOUT s] [SERIAL] [ENV NAME=VALUE ...]): a
# GoogleTest executable, tests discovered at run time. SERIAL: ctest runs its tests alone
# (measurements that compare timings of runs on this machine and would measure the other tests'
# load instead). ENV: more environment for its tests, such as the paths of helper programs built
# beside them (in the environment, not compiled in: an object with a build folder's path in it
# would never be shared through ccache with another checkout's build).
function(chexscale_add_test)
  cmake_parse_arguments(T "SERIAL" "NAME;TIMEOUT" "SOURCES;DEPS;ENV" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests)
  target_precompile_headers(${T_NAME} REUSE_FROM chexscale_pch)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  # Listing a test program's cases loads LibTorch: under ctest -j on 2 busy cores that can take
  # longer than the 5 s default, and a timed-out listing fails the whole program's tests.
  gtest_discover_tests(${T_NAME} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    PROPERTIES TIMEOUT ${T_TIMEOUT})
  # gtest_discover_tests splits a list-valued ENVIRONMENT into separate properties (CMake 3.25),
  # so the environment is set on the discovered tests by a file ctest includes after discovery.
  set(_env_file ${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_environment.cmake)
  set(_serial "")
  if(T_SERIAL)
    set(_serial " RUN_SERIAL TRUE")
  endif()
  set(_env "CHEXSCALE_BIN=$<TARGET_FILE:chexscale>;CHEXSCALE_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
  list(APPEND _env "OMP_NUM_THREADS=1" ${T_ENV})
  file(GENERATE OUTPUT ${_env_file} CONTENT
    "if(${T_NAME}_TESTS)\n  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES ENVIRONMENT \"${_env}\"${_serial})\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_env_file})
endfunction()
