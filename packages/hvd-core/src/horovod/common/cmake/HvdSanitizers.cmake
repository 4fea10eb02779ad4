# Sanitizer builds of hvd's native code (hvd-core's engine and the backends), for CI's sanitizer
# sessions: configure with -DHVD_SANITIZE=thread (ThreadSanitizer) or -DHVD_SANITIZE=address
# (AddressSanitizer with UndefinedBehaviorSanitizer), then call hvd_enable_sanitizers(<target>) on
# every native target. A library built this way runs inside Python only with the sanitizer's
# runtime preloaded (LD_PRELOAD), since the interpreter itself is not instrumented; the `sanitize`
# nox session shows how. Build such variants as RelWithDebInfo: a Release build of a nanobind
# extension is linked stripped, and its reports could name no function.
include_guard(GLOBAL)

set(HVD_SANITIZE "" CACHE STRING "Build with a sanitizer: empty, 'thread', or 'address' (with undefined)")
set_property(CACHE HVD_SANITIZE PROPERTY STRINGS "" thread address)

function(hvd_enable_sanitizers target)
  if(HVD_SANITIZE STREQUAL "")
    return()
  elseif(HVD_SANITIZE STREQUAL "thread")
    set(flags -fsanitize=thread)
  elseif(HVD_SANITIZE STREQUAL "address")
    # Undefined behaviour is fatal, so a report cannot scroll by in a passing test run.
    set(flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  else()
    message(FATAL_ERROR "HVD_SANITIZE=${HVD_SANITIZE}: use thread or address (or leave it empty)")
  endif()
  # Frame pointers and line tables make the reports name the code that raced or overflowed.
  target_compile_options(${target} PRIVATE ${flags} -fno-omit-frame-pointer -g)
  target_link_options(${target} PRIVATE ${flags})
endfunction()
