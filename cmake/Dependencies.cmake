# Third-party packages: Debian's (scripts/install-deps.sh), or the same .debs unpacked into the
# tree (scripts/vendor-deps.sh -> third_party/debian) for machines without network; LibTorch from
# Debian (CPU) or a CUDA LibTorch via Torch_DIR (official archive or a pip torch, docs/gpu.md).
set(CHEXSCALE_VENDOR_ROOT "${CMAKE_SOURCE_DIR}/third_party/debian/root"
    CACHE PATH "Debian packages unpacked by scripts/vendor-deps.sh (used when present)")
if(EXISTS "${CHEXSCALE_VENDOR_ROOT}/usr/include")
  # Searched before the system: headers, libraries and CMake package configs.
  list(PREPEND CMAKE_PREFIX_PATH "${CHEXSCALE_VENDOR_ROOT}/usr")
  list(PREPEND CMAKE_LIBRARY_PATH "${CHEXSCALE_VENDOR_ROOT}/usr/lib/x86_64-linux-gnu")
  # Before LibTorch's own include folder: a pip torch may bundle fmt headers of another version
  # than the Debian libfmt/libspdlog we link, and some of its headers need nlohmann/json.hpp.
  include_directories(BEFORE SYSTEM "${CHEXSCALE_VENDOR_ROOT}/usr/include")
  # The vendored shared libraries are found at run time without LD_LIBRARY_PATH.
  list(APPEND CMAKE_BUILD_RPATH "${CHEXSCALE_VENDOR_ROOT}/usr/lib/x86_64-linux-gnu")
  message(STATUS "chexscale: Debian packages vendored in ${CHEXSCALE_VENDOR_ROOT}")
endif()

# A CUDA LibTorch's config (Caffe2's public/cuda.cmake) runs FindCUDA and enable_language(CUDA),
# which both need nvcc: use /usr/local/cuda's when nvcc is not on PATH (docs/gpu.md).
find_program(CHEXSCALE_NVCC nvcc DOC "nvcc on PATH (a CUDA LibTorch's config needs one)")
if(NOT CHEXSCALE_NVCC AND NOT CUDA_TOOLKIT_ROOT_DIR AND NOT CMAKE_CUDA_COMPILER
   AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDA_TOOLKIT_ROOT_DIR /usr/local/cuda CACHE PATH "CUDA toolkit for FindCUDA")
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "nvcc for enable_language(CUDA)")
endif()
find_package(Torch REQUIRED)
find_package(Threads REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PNG REQUIRED)  # PNG::PNG (libpng16, with ZLIB::ZLIB): tests write PNGs with it

# A C library without a CMake package: its header and shared library, as target chexscale::<name>.
# Found with find_path/find_library rather than pkg-config, which a bare GPU machine may not have.
function(chexscale_find_c_library name header library package)
  string(TOUPPER "${name}" _var)
  find_path(CHEXSCALE_${_var}_INCLUDE_DIR ${header} DOC "folder of ${header}")
  find_library(CHEXSCALE_${_var}_LIBRARY ${library} DOC "lib${library}.so")
  if(NOT CHEXSCALE_${_var}_INCLUDE_DIR OR NOT CHEXSCALE_${_var}_LIBRARY)
    message(FATAL_ERROR "chexscale: lib${library} not found (${header}: "
      "'${CHEXSCALE_${_var}_INCLUDE_DIR}', library: '${CHEXSCALE_${_var}_LIBRARY}'); install "
      "${package} (scripts/install-deps.sh) or vendor it (scripts/vendor-deps.sh)")
  endif()
  add_library(chexscale::${name} UNKNOWN IMPORTED)
  set_target_properties(chexscale::${name} PROPERTIES
    IMPORTED_LOCATION "${CHEXSCALE_${_var}_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CHEXSCALE_${_var}_INCLUDE_DIR}")
  message(STATUS "chexscale: lib${library}: ${CHEXSCALE_${_var}_LIBRARY}")
endfunction()
chexscale_find_c_library(spng spng.h spng libspng-dev)
chexscale_find_c_library(deflate libdeflate.h deflate libdeflate-dev)
chexscale_find_c_library(turbojpeg turbojpeg.h turbojpeg libturbojpeg0-dev)

# DCMTK (libdcmtk-dev): data sets, monochrome images and the JPEG, JPEG-LS and RLE codecs, as
# target chexscale::dcmtk. Its own CMake config names every DCMTK tool; these libraries suffice.
find_path(CHEXSCALE_DCMTK_INCLUDE_DIR dcmtk/config/osconfig.h DOC "folder of dcmtk/")
set(_dcmtk_libraries)
foreach(_lib dcmimgle dcmjpls dcmjpeg dcmdata oflog ofstd)
  find_library(CHEXSCALE_DCMTK_${_lib}_LIBRARY ${_lib} DOC "lib${_lib}.so")
  if(NOT CHEXSCALE_DCMTK_INCLUDE_DIR OR NOT CHEXSCALE_DCMTK_${_lib}_LIBRARY)
    message(FATAL_ERROR "chexscale: DCMTK's lib${_lib} or headers not found; install libdcmtk-dev "
      "(scripts/install-deps.sh)")
  endif()
  list(APPEND _dcmtk_libraries ${CHEXSCALE_DCMTK_${_lib}_LIBRARY})
endforeach()
add_library(chexscale::dcmtk INTERFACE IMPORTED)
set_target_properties(chexscale::dcmtk PROPERTIES
  INTERFACE_LINK_LIBRARIES "${_dcmtk_libraries}"
  INTERFACE_INCLUDE_DIRECTORIES "${CHEXSCALE_DCMTK_INCLUDE_DIR}")
message(STATUS "chexscale: DCMTK: ${_dcmtk_libraries}")

# LibTorch's cmake config exports flags through a variable, not the target, on some versions.
add_library(chexscale_torch INTERFACE)
# pip torch's public/cuda.cmake (seen in 2.5 and 2.6) links torch::nvtoolsext to CUDA::nvToolsExt when
# it finds no NVTX3 headers; CUDA >= 12.9 has no libnvToolsExt, so FindCUDAToolkit makes no such
# target and generation would fail. chexscale does not use NVTX: the header-only NVTX3 stands in.
if(TARGET torch::nvtoolsext AND NOT TARGET CUDA::nvToolsExt)
  add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
  if(TARGET CUDA::nvtx3)
    target_link_libraries(CUDA::nvToolsExt INTERFACE CUDA::nvtx3)
  endif()
endif()
target_link_libraries(chexscale_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(chexscale_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(chexscale_torch INTERFACE ${_torch_flags})
# c10d's headers guard each backend with these: Debian's torch_cpu target exports them; add them
# where a LibTorch's config does not.
if(TARGET torch_cpu)
  get_target_property(_torch_defs torch_cpu INTERFACE_COMPILE_DEFINITIONS)
endif()
if(NOT "${_torch_defs}" MATCHES "USE_C10D_GLOO")
  target_compile_definitions(chexscale_torch INTERFACE USE_DISTRIBUTED USE_C10D_GLOO)
endif()

# Every C++ library we link must share LibTorch's C++ ABI: Debian's are built with the new ABI.
# pip torch before 2.7 used the old one (-D_GLIBCXX_USE_CXX11_ABI=0): stop with the way out
# rather than fail at link time with undefined std::__cxx11 symbols.
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR
    "chexscale: this LibTorch (${Torch_DIR}) uses the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0), "
    "but spdlog, fmt and yaml-cpp from Debian use the new one. Use a LibTorch built with the "
    "cxx11 ABI (the official 'cxx11-abi' archive, or pip torch >= 2.7); see docs/gpu.md.")
endif()

# c10d lives in libtorch (CPU) or libtorch_cuda; its Gloo backend is built in on Debian.
# A CUDA LibTorch (official archive or pip torch's share/cmake/Torch) sets TORCH_CUDA_LIBRARIES.
if(TORCH_CUDA_LIBRARIES)
  set(CHEXSCALE_WITH_CUDA ON)
  target_compile_definitions(chexscale_torch INTERFACE CHEXSCALE_WITH_CUDA=1)
  if(NOT "${_torch_defs}" MATCHES "USE_C10D_NCCL")
    target_compile_definitions(chexscale_torch INTERFACE USE_C10D_NCCL)
  endif()
  # ProcessGroupNCCL.hpp includes <nccl.h>: the official archive has it under include/, a pip
  # torch takes it from the nvidia-nccl wheel (site-packages/nvidia/nccl/include).
  find_path(CHEXSCALE_NCCL_INCLUDE_DIR nccl.h
    HINTS ${TORCH_INCLUDE_DIRS} ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_INCLUDE_DIR}
    DOC "folder of nccl.h")
  if(NOT CHEXSCALE_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR
      "chexscale: nccl.h not found; pass -DCHEXSCALE_NCCL_INCLUDE_DIR=<dir> (pip torch: "
      "python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], \"include\"))')")
  endif()
  # ATen's CUDA headers (pulled in by ProcessGroupNCCL.hpp) include cuda_runtime_api.h, cublas_v2.h,
  # cusparse.h and cusolverDn.h from the toolkit that Torch's config found.
  target_include_directories(chexscale_torch SYSTEM INTERFACE ${CHEXSCALE_NCCL_INCLUDE_DIR}
    ${CUDAToolkit_INCLUDE_DIRS})
else()
  set(CHEXSCALE_WITH_CUDA OFF)
endif()
message(STATUS "chexscale: LibTorch ${Torch_VERSION}, CUDA ${CHEXSCALE_WITH_CUDA}")

# MPI (libopenmpi-dev) for the mpi collective backend (src/distributed/process_group_mpi.cpp).
# Without it, or with -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON, the build has the stub
# (process_group_no_mpi.cpp) and `--backend mpi` is a usage error.
# Only MPI's C API is used (from C++, without the deprecated C++ bindings).
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI COMPONENTS CXX)
if(MPI_CXX_FOUND)
  set(CHEXSCALE_WITH_MPI ON)
  message(STATUS "chexscale: MPI ${MPI_CXX_VERSION}: ${MPI_CXX_LIBRARIES}")
else()
  set(CHEXSCALE_WITH_MPI OFF)
  message(STATUS "chexscale: no MPI found: the mpi backend is not built (install libopenmpi-dev)")
endif()
