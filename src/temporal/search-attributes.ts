// Registering the runs' search attributes on a namespace, idempotently: the embedded server gets
// them at launch, an existing cluster through `subagents setup` (or this function).
import type { ConnectionLike } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SUBAGENT_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes';

const { IndexedValueType } = temporal.api.enums.v1;
const INDEXED_TYPES = {
  Keyword: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  Int: IndexedValueType.INDEXED_VALUE_TYPE_INT,
  Double: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
} as const;

/**
 * Adds whichever subagent search attributes the namespace lacks; resolves with the names it
 * added. Rejects if the server refuses (no operator permission, say).
 */
export async function ensureSearchAttributes(connection: ConnectionLike, namespace: string): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.entries(SUBAGENT_SEARCH_ATTRIBUTES).filter(([name]) => !(name in (customAttributes ?? {})));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, INDEXED_TYPES[type]])),
  });
  return missing.map(([name]) => name);
}
