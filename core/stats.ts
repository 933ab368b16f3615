/**
 * The median of a sample: the middle value, or the mean of the two middle values of an even count
 * (benchmarks often run two rounds, where taking the upper one would report the slower round).
 */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}
