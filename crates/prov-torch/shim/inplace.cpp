// The two in-place ATen operations an optimizer written as in Python needs and tch does not
// expose with their scalar argument: `self.add_(other, alpha=a)` and
// `self.addcmul_(t1, t2, value=v)`. ATen computes `self + a*other` in one fused kernel; the
// same result spelled out in tch (`self += other * a`) rounds twice and builds a temporary.
//
// Tensors cross the boundary as tch passes them to its own C API: a pointer to an
// `at::Tensor`. C++ exceptions (a shape or dtype mismatch) must not cross into Rust: they are
// caught and their message copied into the caller's buffer, and the function returns 1.
#include <ATen/ATen.h>

#include <cstring>
#include <exception>

namespace {
int fail(const std::exception& e, char* message, size_t capacity) {
  if (capacity > 0) {
    std::strncpy(message, e.what(), capacity - 1);
    message[capacity - 1] = '\0';
  }
  return 1;
}
}  // namespace

extern "C" int prov_add_scaled_(at::Tensor* self, const at::Tensor* other, double alpha, char* message,
                                size_t capacity) {
  try {
    self->add_(*other, alpha);
    return 0;
  } catch (const std::exception& e) {
    return fail(e, message, capacity);
  }
}

extern "C" int prov_addcmul_(at::Tensor* self, const at::Tensor* t1, const at::Tensor* t2, double value,
                             char* message, size_t capacity) {
  try {
    self->addcmul_(*t1, *t2, value);
    return 0;
  } catch (const std::exception& e) {
    return fail(e, message, capacity);
  }
}
