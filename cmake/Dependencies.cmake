# Third-party packages, all from Debian (scripts/install-deps.sh) or a CUDA LibTorch via Torch_DIR.
find_package(Torch REQUIRED)
find_package(Threads REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(SPNG REQUIRED IMPORTED_TARGET spng)
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
pkg_check_modules(DEFLATE REQUIRED IMPORTED_TARGET libdeflate)

# LibTorch's cmake config exports flags through a variable, not the target, on some versions.
add_library(chexscale_torch INTERFACE)
target_link_libraries(chexscale_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(chexscale_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(chexscale_torch INTERFACE ${_torch_flags})

# c10d lives in libtorch (CPU) or libtorch_cuda; its Gloo backend is built in on Debian.
# A CUDA LibTorch (official archive or pip torch's share/cmake/Torch) sets TORCH_CUDA_LIBRARIES.
if(TORCH_CUDA_LIBRARIES)
  set(CHEXSCALE_WITH_CUDA ON)
  target_compile_definitions(chexscale_torch INTERFACE CHEXSCALE_WITH_CUDA=1)
else()
  set(CHEXSCALE_WITH_CUDA OFF)
endif()
message(STATUS "chexscale: LibTorch ${Torch_VERSION}, CUDA ${CHEXSCALE_WITH_CUDA}")
