// The search attributes a run keeps up to date, so `subagents list` and the Temporal Web UI can
// filter runs: provider, parent run, depth, status and stop reason. Never encrypted: they hold no
// prompt or output text.
import { defineSearchAttributeKey } from '@temporalio/common';

export const PROVIDER_ATTRIBUTE = defineSearchAttributeKey('SubagentProvider', 'KEYWORD');
export const PARENT_RUN_ATTRIBUTE = defineSearchAttributeKey('SubagentParentRunId', 'KEYWORD');
export const DEPTH_ATTRIBUTE = defineSearchAttributeKey('SubagentDepth', 'INT');
/** `running`, `awaiting-approval` (a tool call waits for `approve`), `parked` (settled, resumable) or `closed`. */
export const STATUS_ATTRIBUTE = defineSearchAttributeKey('SubagentStatus', 'KEYWORD');
/** The latest segment's stop reason, once it settled. */
export const STOP_REASON_ATTRIBUTE = defineSearchAttributeKey('SubagentStopReason', 'KEYWORD');

/** The run that began the tree this run belongs to (its own id at the top). */
export const ROOT_RUN_ATTRIBUTE = defineSearchAttributeKey('SubagentRootRunId', 'KEYWORD');
/** Tokens the run and every run below it spent, as of its last settled segment. */
export const TOKENS_ATTRIBUTE = defineSearchAttributeKey('SubagentTokens', 'INT');
/** Their cost in USD, as the workers price the models. */
export const COST_ATTRIBUTE = defineSearchAttributeKey('SubagentCostUsd', 'DOUBLE');

/** Name → type, as `temporal server start-dev --search-attribute` and the operator API take them. */
export const SUBAGENT_SEARCH_ATTRIBUTES: Readonly<Record<string, 'Keyword' | 'Int' | 'Double'>> = {
  SubagentProvider: 'Keyword',
  SubagentParentRunId: 'Keyword',
  SubagentDepth: 'Int',
  SubagentStatus: 'Keyword',
  SubagentStopReason: 'Keyword',
  SubagentRootRunId: 'Keyword',
  SubagentTokens: 'Int',
  SubagentCostUsd: 'Double',
};
