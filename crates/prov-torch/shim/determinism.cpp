// The one libtorch setting tch does not expose: ATen's global "deterministic algorithms"
// switch (what torch.use_deterministic_algorithms sets in Python), plus cuDNN's
// deterministic/benchmark flags that go with it. C linkage, so Rust can call it without a
// C++ binding generator.
#include <ATen/Context.h>

extern "C" void prov_set_deterministic(int on, int warn_only) {
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(on != 0, warn_only != 0);
  ctx.setDeterministicCuDNN(on != 0);
  ctx.setBenchmarkCuDNN(false);
}

extern "C" int prov_deterministic_algorithms() {
  return at::globalContext().deterministicAlgorithms() ? 1 : 0;
}

// The CPU kernels ATen dispatches to ("DEFAULT", "AVX2", "AVX512"): what it really runs, after
// reading ATEN_CPU_CAPABILITY, so that the worker checks the envelope against ATen itself
// rather than against the variable. Writes at most `capacity` bytes, NUL-terminated.
#include <ATen/Version.h>
#include <cstring>

extern "C" void prov_cpu_capability(char* out, size_t capacity) {
  std::string capability = at::get_cpu_capability();
  std::strncpy(out, capability.c_str(), capacity - 1);
  out[capacity - 1] = '\0';
}

// cuDNN's flags as ATen holds them: bit 0 deterministic, bit 1 benchmark. Read back for the
// envelope of a CUDA stage, rather than assumed from what prov_set_deterministic asked for.
extern "C" int prov_cudnn_flags() {
  auto& ctx = at::globalContext();
  return (ctx.deterministicCuDNN() ? 1 : 0) | (ctx.benchmarkCuDNN() ? 2 : 0);
}
