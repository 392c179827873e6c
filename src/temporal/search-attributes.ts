// Registering the runs' search attributes on a namespace, idempotently: the embedded server gets
// them at launch, an existing cluster through `subagents setup` (or this function).
import { setTimeout as sleep } from 'node:timers/promises';
import type { ConnectionLike } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SUBAGENT_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes';
import { SubagentError } from '../seam/errors';
import { GRPC_INVALID_ARGUMENT } from './errors';

const { IndexedValueType } = temporal.api.enums.v1;
const INDEXED_TYPES = {
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  Int: IndexedValueType.INDEXED_VALUE_TYPE_INT,
  Double: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
} as const;
/** A value of each type, for a list query that names an attribute. */
const QUERY_VALUES = { Keyword: "''", Int: '0', Double: '0' } as const;
/** How long attributes just registered may take to be in use (a host reads them within seconds). */
const IN_USE_TIMEOUT_MS = 30_000;
const IN_USE_POLL_MS = 100;

/**
 * Adds whichever subagent search attributes the namespace lacks and waits until the server takes
 * them in runs; resolves with the names it added. Rejects if the server refuses (no operator
 * permission, say), and with `UNAVAILABLE` if they are not in use within 30 s. A history host can
 * take them seconds after the frontend: a run's workflow task that updates them before it does is
 * refused and retried, the run delayed but nothing lost.
 */
export async function ensureSearchAttributes(connection: ConnectionLike, namespace: string): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.entries(SUBAGENT_SEARCH_ATTRIBUTES).filter(([name]) => !(name in (customAttributes ?? {})));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, INDEXED_TYPES[type]])),
  });
  await untilInUse(connection, namespace, missing);
  return missing.map(([name]) => name);
}

/**
 * Until a list query naming every attribute is accepted. A server keeps the attributes' names in a
 * cache each of its hosts refreshes every few seconds, and refuses a start that sets one it does
 * not know yet, as it refuses the query.
 */
async function untilInUse(
  connection: ConnectionLike,
  namespace: string,
  attributes: [string, keyof typeof QUERY_VALUES][],
): Promise<void> {
  const query = attributes.map(([name, type]) => `${name} = ${QUERY_VALUES[type]}`).join(' AND ');
  const deadline = Date.now() + IN_USE_TIMEOUT_MS;
  for (;;) {
    try {
      await connection.workflowService.countWorkflowExecutions({ namespace, query });
      return;
    } catch (err) {
      if ((err as { code?: unknown }).code !== GRPC_INVALID_ARGUMENT) throw err;
      if (Date.now() > deadline) {
        throw new SubagentError(
          `the search attributes registered on ${namespace} are not in use after ${IN_USE_TIMEOUT_MS / 1000} s`,
          'UNAVAILABLE',
          { cause: err },
        );
      }
      await sleep(IN_USE_POLL_MS);
    }
  }
}
