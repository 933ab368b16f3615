/* Runs when a process loads it: appends that process's executable to /tmp/worldline-provider-ran. */
static long sys3(long n, long a, long b, long c) {
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
__attribute__((constructor)) static void ran(void) {
  char buf[300];
  long n = sys3(89, (long)"/proc/self/exe", (long)buf, 256);
  if (n <= 0) return;
  buf[n++] = '\n';
  long fd = sys3(2, (long)"/tmp/worldline-provider-ran", 02101, 0666);
  if (fd < 0) return;
  sys3(1, fd, (long)buf, n);
  sys3(3, fd, 0, 0);
}
