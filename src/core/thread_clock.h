// CPU time of the calling thread. Budgets for work a request may cost (compiling a grammar) use
// it: the work a schema needs does not change when the server is busy, the wall time does.
#pragma once
#include <ctime>

namespace striker {

inline double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

}  // namespace striker
