// Offloaded payloads in PostgreSQL, the database a Temporal deployment already runs: one table,
// a row per blob, keyed like the file store (namespace, run, SHA-256). Any number of workers and
// callers on any machines share it.
import { Pool, type PoolConfig } from 'pg';
import type { PayloadBlobKey, SubagentPayloadStore } from './payload-store';

const TABLE = 'subagent_payloads';
/** PostgreSQL's error codes (SQLSTATE) for a unique violation and a table that already exists. */
const UNIQUE_VIOLATION = '23505';
const DUPLICATE_TABLE = '42P07';
/**
 * How long a connection may take to open, and a statement to answer, before the call fails (a
 * retryable failure to its caller): a database that stops answering would otherwise hold every
 * call for ever, a sweep with it, and the worker's shutdown, which waits for the sweep. A blob may
 * be a whole payload (256 MiB with a store), which two minutes carry at 2 MiB/s. A URL's
 * `query_timeout` parameter (ms), or a config of the caller's, sets its own.
 */
const CONNECT_TIMEOUT_MS = 10_000;
const QUERY_TIMEOUT_MS = 120_000;

/** Payloads in the PostgreSQL database at `connectionString` (`postgres://...`); creates its table. */
export class PostgresPayloadStore implements SubagentPayloadStore {
  readonly name = 'postgres';
  private readonly pool: Pool;
  private ready: Promise<unknown> | undefined;

  constructor(connection: string | PoolConfig) {
    this.pool = new Pool({
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: QUERY_TIMEOUT_MS,
      ...(typeof connection === 'string' ? { connectionString: connection } : connection),
    });
    // An idle client that loses its server is replaced on the next query; nothing to do here.
    this.pool.on('error', () => undefined);
  }

  /** Creates the table on first use; a failed attempt is tried again by the next call. */
  private table(): Promise<unknown> {
    this.ready ??= this.pool
      .query(
        `CREATE TABLE IF NOT EXISTS ${TABLE} (
           namespace text NOT NULL, run_id text NOT NULL, digest text NOT NULL, data bytea NOT NULL,
           created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, run_id, digest))`,
      )
      .catch((err: unknown) => {
        // Another process created it at the same moment (workers and callers of a new deployment
        // starting together): IF NOT EXISTS does not cover a creation still in flight, which
        // fails the others, once it commits, on pg_type's unique index (or as a duplicate table).
        const code = (err as { code?: unknown }).code;
        if (code === UNIQUE_VIOLATION || code === DUPLICATE_TABLE) return;
        this.ready = undefined;
        throw err;
      });
    return this.ready;
  }

  async put({ namespace, runId, digest }: PayloadBlobKey, bytes: Uint8Array): Promise<void> {
    await this.table();
    await this.pool.query(
      // A blob stored again counts as written now (created_at is when it was last written): a start
      // repeated with its idempotency key after the server forgot the run stores the same input,
      // whose old time had let a sweep delete it before the start reached the server.
      `INSERT INTO ${TABLE} (namespace, run_id, digest, data) VALUES ($1, $2, $3, $4)
       ON CONFLICT (namespace, run_id, digest) DO UPDATE SET created_at = now()`,
      [namespace, runId, digest, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)],
    );
  }

  async get({ namespace, runId, digest }: PayloadBlobKey): Promise<Uint8Array | undefined> {
    await this.table();
    const { rows } = await this.pool.query<{ data: Buffer }>(
      `SELECT data FROM ${TABLE} WHERE namespace = $1 AND run_id = $2 AND digest = $3`,
      [namespace, runId, digest],
    );
    return rows[0]?.data;
  }

  async runs(namespace: string): Promise<{ runId: string; newestMs: number }[]> {
    await this.table();
    const { rows } = await this.pool.query<{ run_id: string; newest: Date }>(
      `SELECT run_id, max(created_at) AS newest FROM ${TABLE} WHERE namespace = $1 GROUP BY run_id`,
      [namespace],
    );
    return rows.map((row) => ({ runId: row.run_id, newestMs: row.newest.getTime() }));
  }

  async deleteRun(namespace: string, runId: string, unlessWrittenAfter?: number): Promise<boolean> {
    await this.table();
    if (unlessWrittenAfter === undefined) {
      await this.pool.query(`DELETE FROM ${TABLE} WHERE namespace = $1 AND run_id = $2`, [namespace, runId]);
      return true;
    }
    // One statement: no row of the run written from the next millisecond on (a listed time is
    // created_at cut to milliseconds), or none deleted. The NOT EXISTS sees the rows as they were
    // when the statement began; a row a store held then (the same blob stored again) is rechecked
    // as it was committed once the DELETE has waited for it, so its own created_at keeps it.
    const { rowCount } = await this.pool.query(
      `DELETE FROM ${TABLE} WHERE namespace = $1 AND run_id = $2 AND created_at < $3 AND NOT EXISTS (
         SELECT 1 FROM ${TABLE} WHERE namespace = $1 AND run_id = $2 AND created_at >= $3)`,
      [namespace, runId, new Date(unlessWrittenAfter + 1)],
    );
    return (rowCount ?? 0) > 0;
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
