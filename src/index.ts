// The public API: the subagent seam, durable on Temporal.
export * from './types';
export {
  HarnessError,
  SUBAGENT_ERROR_CODES,
  SubagentDepthError,
  SubagentError,
  isSubagentError,
  type SubagentErrorCode,
} from './errors';
export { TemporalSubagentService, type TemporalSubagentServiceOptions } from './service';
export type { SubagentEventListener, SubagentEventName, SubagentServiceEvents } from './events';
export { createSubagentWorker, bundleSubagentWorkflows, type SubagentWorker, type SubagentWorkerOptions } from './worker';
export { startDevServer, resolveTemporalBinary, freePort, type DevServer, type DevServerOptions } from './dev-server';
export {
  connectTemporal,
  temporalSettingsFromEnv,
  type ConnectTemporalOptions,
  type TemporalConnectionSettings,
  type TemporalEnvironment,
} from './config';
export { DEFAULT_RUN_SETTINGS } from './settings';
export { defaultTaskQueue, RUN_ID_PREFIX } from './constants';
export {
  createScriptedProvider,
  DEFAULT_SCRIPTED_REPLY,
  type ScriptedAgentOptions,
  type ScriptedProviderOptions,
  type ScriptedTurn,
  type ScriptedTurnEvent,
} from './providers/scripted';
export { hostSeamProvider, type HostSeamProviderOptions } from './providers/seam-adapter';
export {
  SUBAGENT_RESULT_TOOL_NAME,
  SUBAGENT_TOOL_NAME,
  createDelegationTool,
  createSubagentResultTool,
  createSubagentTool,
  subagentToolWording,
  type SubagentStarter,
  type SubagentToolCallContext,
  type SubagentToolConfig,
  type SubagentToolDefinition,
  type SubagentToolParameters,
} from './tool';
export { runOpenAIToolCall, toAiSdkTool, toOpenAITool } from './tool-adapters';
export { ACP_STOP_REASONS, createAcpProvider, type AcpProviderOptions } from './providers/acp';
export { builtinProvider, providersFromEnv, BUILTIN_PROVIDERS } from './providers/from-env';
export { AesGcmPayloadCodec, codecFromEnv, generateEncryptionKey, type EncryptionKey } from './codec';
export { exportAudit, verifyAudit, auditDrafts, type AuditRecord, type AuditVerdict } from './audit';
export { ensureSearchAttributes } from './search-attributes';
export {
  DEPTH_ATTRIBUTE,
  PARENT_RUN_ATTRIBUTE,
  PROVIDER_ATTRIBUTE,
  STATUS_ATTRIBUTE,
  STOP_REASON_ATTRIBUTE,
  SUBAGENT_SEARCH_ATTRIBUTES,
} from '../workflows/search-attributes';
export { tracingClientInterceptors, tracingWorkerOptions, TRACING_WORKFLOW_MODULE, type SubagentTracing } from './tracing';
export { runStarted } from './run-handle';
export {
  createForkProvider,
  createSpawnProvider,
  DEFAULT_SYSTEM_PROMPT,
  endpointFromEnv,
  type LlmProviderOptions,
} from './providers/llm';
export {
  builtinFileTools,
  listDirectoryTool,
  readFileTool,
  resolveInside,
  searchTextTool,
} from '../activities/file-tools';
export {
  OutputSchemaError,
  assertSupportedOutputSchema,
  snapshotOutputSchema,
  validateStructuredValue,
  type StructuredOutputSchema,
  type StructuredScalar,
  type StructuredSchemaNode,
  type StructuredSchemaType,
} from './schema';
export {
  STRUCTURED_OUTPUT_DESCRIPTION,
  STRUCTURED_OUTPUT_INSTRUCTION,
  STRUCTURED_OUTPUT_TOOL,
  createStructuredOutputRuntime,
  type StructuredOutputRuntime,
  type StructuredToolDefinition,
  type ToolCallOutcome,
} from '../activities/structured-output';
export {
  STRUCTURED_OUTPUT_NUDGE,
  subagentRunWorkflow,
  type SegmentOutcome,
  type SubagentRunInput,
  type SubagentRunOutcome,
  type SubagentRunStatus,
} from '../workflows/subagent-run';
