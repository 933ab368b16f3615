/**
 * Streaming output to stdout. Commands that write many rows (cat, render) wait for 'drain' when
 * the pipe's buffer is full, so rows read from the shards do not pile up in memory behind a slow
 * reader (`| less`, a network pipe).
 */
export async function writeStdout(chunk: string): Promise<void> {
  if (!process.stdout.write(chunk)) await new Promise((r) => process.stdout.once('drain', r));
}
