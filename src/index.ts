// `durable-subagents`: the caller's entry point. Everything a process needs to start, steer, watch
// and audit durable runs: the seam's vocabulary, the service (a Temporal client), the model-facing
// `subagent` tool and its adapters, connection and encryption. It never loads the Temporal worker;
// hosting runs is `durable-subagents/worker`, testing them `durable-subagents/testing`.
export * from './seam';
export {
  type ConnectClientOptions,
  DEFAULT_TEMPORAL_ADDRESS,
  type SubagentClientConnection,
  connectClient,
} from './client/connect';
export type { SubagentEventListener, SubagentEventName, SubagentServiceEvents } from './client/events';
export { runStarted } from './client/run-handle';
export { DEFAULT_RUN_SETTINGS } from './client/run-settings';
export { TemporalSubagentService, type TemporalSubagentServiceOptions } from './client/service';
export {
  SUBAGENT_RESULT_TOOL_NAME,
  SUBAGENT_TOOL_NAME,
  type SubagentApprovalRequestedEvent,
  type SubagentStarter,
  type SubagentToolCallContext,
  type SubagentToolConfig,
  type SubagentToolDefinition,
  type SubagentToolParameters,
  UNSEEDED_NOTICE,
  createSubagentResultTool,
  createSubagentTool,
  subagentToolWording,
} from './client/subagent-tool';
export { runOpenAIToolCall, toAiSdkTool, toOpenAITool } from './client/tool-adapters';
export {
  type AuditRecord,
  type AuditSigner,
  type AuditVerdict,
  auditDrafts,
  auditSignerFromEnv,
  ed25519AuditSigner,
  exportAudit,
  generateAuditKeyPair,
  streamAudit,
  verifyAudit,
  verifyAuditRecords,
} from './audit';
export { assertSupportedOutputSchema, snapshotOutputSchema, validateStructuredValue } from './structured/schema';
export { AesGcmPayloadCodec, type EncryptionKey, codecFromEnv, generateEncryptionKey } from './temporal/codec';
export { ENCRYPTED_FAILURE_CONVERTER_PATH } from './temporal/failure-converter';
export { type TemporalConnectionSettings, temporalSettingsFromEnv } from './temporal/config';
export { ensureSearchAttributes } from './temporal/search-attributes';
export { type SubagentTracing, tracingClientInterceptors } from './temporal/tracing';
export {
  STRUCTURED_OUTPUT_NUDGE,
  type SegmentOutcome,
  type SubagentRunInput,
  type SubagentRunOutcome,
  type SubagentRunStatus,
} from '../workflows/definitions';
export {
  COST_ATTRIBUTE,
  DEPTH_ATTRIBUTE,
  PARENT_RUN_ATTRIBUTE,
  PROVIDER_ATTRIBUTE,
  ROOT_RUN_ATTRIBUTE,
  STATUS_ATTRIBUTE,
  STOP_REASON_ATTRIBUTE,
  SUBAGENT_SEARCH_ATTRIBUTES,
  TOKENS_ATTRIBUTE,
} from '../workflows/search-attributes';
