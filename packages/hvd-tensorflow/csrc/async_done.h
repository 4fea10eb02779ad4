// TensorFlow's `done` of an asynchronous kernel, kept past the compute function's return.
//
// TF_NewAsyncKernelBuilder's compute function receives `done` as the address of TensorFlow's own
// std::function<void()>, a by-value parameter of AsyncOpKernel::ComputeAsync: it dies when the
// compute function returns, and calling it later (TF_RunAsyncOpKernelDoneCallback on the stale
// address) crashed in graph mode. A copy, made while it is alive, lives as long as we need it.
//
// This leans on TensorFlow and this library agreeing on std::function's layout: both are built
// with libstdc++ (the manylinux toolchains), whose std::function layout has not changed since
// GCC 5. tests/test_native_kernels.py completes kernels from another thread, after their compute
// function returned, in eager mode, in tf.function and in graph mode, which would crash otherwise.
#pragma once

#include <functional>
#include <memory>

#include "tf_c_api.h"

namespace hvdtf {

class AsyncDone {
 public:
  explicit AsyncDone(TF_AsyncOpKernelDoneCallback* done)
      : done_(std::make_unique<std::function<void()>>(*reinterpret_cast<std::function<void()>*>(done))) {}

  // Tells TensorFlow the kernel has finished (outputs and status are set). Once only.
  void Run() {
    std::unique_ptr<std::function<void()>> done = std::move(done_);
    (*done)();
  }

 private:
  std::unique_ptr<std::function<void()>> done_;
};

}  // namespace hvdtf
