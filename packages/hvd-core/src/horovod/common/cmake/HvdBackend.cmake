# The build of an hvd collective backend: a plain shared library implementing hvd-core's C ABI
# (horovod/hvd_backend.h), which the engine opens with dlopen and queries through
# hvd_backend_v1_get. Every backend needs the same things from its build (the ABI header, hidden
# symbols, a checked export list, the package version, an install directory), so they live here,
# shipped with the header in hvd-core's wheel.
#
# Found without asking Python: a scikit-build-core build adds this directory to CMAKE_MODULE_PATH
# (hvd-core's `cmake.module` entry point), and a plain CMake build passes
#   -DCMAKE_MODULE_PATH="$(python -c 'import horovod.common as c; print(c.get_cmake_dir())')"
# Then, in a backend's CMakeLists.txt:
#
#   include(HvdBackend)
#   hvd_add_backend(<target>
#     LANGUAGE C|CXX              # C99 or C++17, extensions off
#     SOURCES <file>...
#     INSTALL_DIR <dir>           # where the library goes in the wheel
#     [EXPORTS_MAP <file>]        # a linker version script: the only symbols the library exports
#     [EXCLUDE_LIBS]              # keep the symbols of static libraries linked in local
#     [UNDEFINED_FROM_PROCESS]    # leave symbols undefined that the process provides before it
#                                 # opens the library (the MPI backend's libmpi, loaded first)
#     [VERSION_DEFINE <NAME>])    # NAME="<package version>" when scikit-build-core builds it
#
# and then links its own dependencies (target_link_libraries(<target> PRIVATE ...)).
# Sets HVD_CORE_INCLUDE_DIR, the directory holding horovod/hvd_backend.h, for other targets.
include_guard(GLOBAL)

include("${CMAKE_CURRENT_LIST_DIR}/HvdSanitizers.cmake")

# The header ships beside this file in hvd-core (horovod/common/include): the helper and the ABI
# it builds against always come from the same hvd-core.
get_filename_component(HVD_CORE_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
if(NOT EXISTS "${HVD_CORE_INCLUDE_DIR}/horovod/hvd_backend.h")
  message(FATAL_ERROR
    "HvdBackend.cmake (${CMAKE_CURRENT_LIST_DIR}) found no horovod/hvd_backend.h in "
    "${HVD_CORE_INCLUDE_DIR}: hvd-core's installation is incomplete; reinstall hvd-core.")
endif()
message(STATUS "hvd-core ABI headers: ${HVD_CORE_INCLUDE_DIR}")

# Release unless the builder chose (scikit-build-core passes its cmake.build-type): the reduction
# loops must vectorise, which a plain CMake build without a type would not do.
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release)
endif()

function(hvd_add_backend target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "EXCLUDE_LIBS;UNDEFINED_FROM_PROCESS" "LANGUAGE;EXPORTS_MAP;VERSION_DEFINE;INSTALL_DIR" "SOURCES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "hvd_add_backend(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT arg_SOURCES OR NOT arg_INSTALL_DIR)
    message(FATAL_ERROR "hvd_add_backend(${target}): SOURCES and INSTALL_DIR are required")
  endif()
  if(arg_LANGUAGE STREQUAL "CXX")
    set(standard 17)
  elseif(arg_LANGUAGE STREQUAL "C")
    set(standard 99)
  else()
    message(FATAL_ERROR "hvd_add_backend(${target}): LANGUAGE must be C or CXX, not '${arg_LANGUAGE}'")
  endif()
  set(lang ${arg_LANGUAGE})

  add_library(${target} SHARED ${arg_SOURCES})
  target_include_directories(${target} PRIVATE "${HVD_CORE_INCLUDE_DIR}")
  # Hidden by default: only what HVD_BACKEND_EXPORT marks is visible to the engine.
  set_target_properties(${target} PROPERTIES
    ${lang}_STANDARD ${standard}
    ${lang}_STANDARD_REQUIRED ON
    ${lang}_EXTENSIONS OFF
    ${lang}_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(CMAKE_${lang}_COMPILER_ID MATCHES "GNU|Clang")
    # An ABI table's functions take arguments that a given backend has no use for.
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  endif()
  if(arg_VERSION_DEFINE AND DEFINED SKBUILD_PROJECT_VERSION)
    # Reported by the backend table's `version`, shown by horovodrun --check-build.
    target_compile_definitions(${target} PRIVATE ${arg_VERSION_DEFINE}="${SKBUILD_PROJECT_VERSION}")
  endif()

  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    set(link_options)
    if(arg_EXPORTS_MAP)
      # Visibility covers our own code; the version script also hides what it cannot reach
      # (template instantiations and typeinfo from a dependency's headers).
      get_filename_component(exports "${arg_EXPORTS_MAP}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
      list(APPEND link_options "LINKER:--version-script=${exports}")
      set_target_properties(${target} PROPERTIES LINK_DEPENDS "${exports}")
    endif()
    if(arg_EXCLUDE_LIBS)
      list(APPEND link_options "LINKER:--exclude-libs,ALL")
    endif()
    # An undefined symbol fails the link, not the dlopen on a user's machine. Clang leaves the
    # sanitizer runtime out of shared libraries (it comes from the preloaded runtime), so
    # sanitizer builds with Clang do without this check, as does a library whose undefined
    # symbols the process provides (UNDEFINED_FROM_PROCESS).
    if(NOT arg_UNDEFINED_FROM_PROCESS AND NOT (HVD_SANITIZE AND CMAKE_${lang}_COMPILER_ID MATCHES "Clang"))
      list(APPEND link_options "LINKER:--no-undefined")
    endif()
    target_link_options(${target} PRIVATE ${link_options})
  endif()

  hvd_enable_sanitizers(${target})
  install(TARGETS ${target} LIBRARY DESTINATION "${arg_INSTALL_DIR}")
endfunction()
