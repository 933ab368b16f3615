/** DuckDB, the independent reader our verification, reading and audits go through. */
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';

/** An in-memory DuckDB with a memory cap, closed when `fn` is done. */
export async function withDuckDB<T>(fn: (conn: DuckDBConnection) => Promise<T>, memoryLimit = '1GB'): Promise<T> {
  const db = await DuckDBInstance.create(':memory:', { memory_limit: memoryLimit, threads: '2' });
  const conn = await db.connect();
  try {
    return await fn(conn);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

export function query<T = Record<string, unknown>>(sql: string): Promise<T[]> {
  return withDuckDB(async (conn) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as T[]);
}

/** A path as a SQL string literal. */
export function sqlString(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}
