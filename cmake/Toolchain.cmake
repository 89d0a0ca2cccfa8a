# Build speed on small machines: ccache when present, a fast linker, warnings on.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  # PCH-friendly ccache settings; passed through env so no user config is needed.
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      ${CCACHE_PROGRAM})
endif()

include(CheckCXXSourceCompiles)
find_program(LLD_LINKER ld.lld)
if(LLD_LINKER)
  add_link_options(-fuse-ld=lld)
endif()

# The warnings every target of ours is built with (the fuzz targets' clang commands too); with
# CHEXSCALE_WERROR (CI) a warning fails the build.
set(CHEXSCALE_WARNING_FLAGS -Wall -Wextra -Wno-unused-parameter)
if(CHEXSCALE_WERROR)
  list(APPEND CHEXSCALE_WARNING_FLAGS -Werror)
endif()
add_compile_options(${CHEXSCALE_WARNING_FLAGS})
