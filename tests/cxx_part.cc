// cxx_part.cc: labelprof.h used from C++, the language most hot code is written in.
#include <labelprof.h>

extern "C" void lp_test_cxx_scoped(void (*inside)(void));

namespace {
struct Kernel {
  void run(void (*inside)(void)) const {
    LP_SCOPE_L(LP_LEVEL_OPERATOR, "c++ kernel");
    inside();
  }
};
}  // namespace

extern "C" void lp_test_cxx_scoped(void (*inside)(void)) {
  LP_SCOPE("c++ outer");
  Kernel().run(inside);
  LP_BEGIN("c++ manual");
  LP_END();
}
