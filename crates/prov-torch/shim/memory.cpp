// Tells glibc's malloc to keep freed memory in the process instead of handing it back to the
// kernel. A training step frees and re-allocates the same tensor sizes every step; with
// glibc's defaults, blocks above the (dynamic) mmap threshold are unmapped when freed and the
// heap top is trimmed, so the next step faults every page in again, zero-filled (measured: 50
// to 63 MiB of fresh pages per step of the main job's model, about 5% of its time). No value
// that libtorch computes depends on where its memory comes from.
#include <malloc.h>

extern "C" int prov_keep_freed_memory() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2); larger
  // blocks are still mapped and unmapped. The trim threshold has no such bound.
  int mmap_ok = mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  int trim_ok = mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return (mmap_ok == 1 && trim_ok == 1) ? 1 : 0;
}

// Asks the kernel to kill this process when its parent dies, so that a worker whose `prov`
// was killed stops computing (and releases the store) instead of training on as an orphan.
// Returns 1 when the parent is still the one that started us (not re-parented already).
#include <sys/prctl.h>
#include <csignal>
#include <unistd.h>

extern "C" int prov_die_with_parent(int parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    return 0;
  }
  return getppid() == parent ? 1 : 0;
}
