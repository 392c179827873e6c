// `durable-subagents/worker`: the entry point of a process that hosts runs. Workers, the
// connection they share with a client (the embedded dev server when none is configured), the
// providers and the tools their children call, the activities and the workflow itself.
export { RESERVED_ACTIVITY_NAMES, RunContextCache, type SubagentActivities, createActivities } from '../../activities';
export { subagentRunWorkflow } from '../../workflows/subagent-run';
export { ACP_STOP_REASONS, type AcpProviderOptions, createAcpProvider } from '../providers/acp';
export { BUILTIN_PROVIDERS, builtinProvider, providersFromEnv } from '../providers/from-env';
export {
  DEFAULT_SYSTEM_PROMPT,
  type LlmProviderOptions,
  createForkProvider,
  createSpawnProvider,
  endpointFromEnv,
} from '../providers/llm';
export { type HostSeamProviderOptions, hostSeamProvider } from '../providers/seam-adapter';
export {
  STRUCTURED_OUTPUT_DESCRIPTION,
  STRUCTURED_OUTPUT_INSTRUCTION,
  createStructuredOutputRuntime,
} from '../structured/runtime';
export {
  type DevServer,
  type DevServerOptions,
  freePort,
  resolveTemporalBinary,
  startDevServer,
} from '../temporal/dev-server';
export { TRACING_WORKFLOW_MODULE, tracingWorkerOptions } from '../temporal/tracing';
export {
  ConfinedRoot,
  type SubagentDelegationToolConfig,
  ToolPathError,
  builtinFileTools,
  createDelegationTool,
  defaultSystemPrompt,
  listDirectoryTool,
  readFileTool,
  searchTextTool,
} from '../tools';
export { type ConnectTemporalOptions, type TemporalEnvironment, connectTemporal } from './connect';
export { QUERY_PAGE_BYTES, queryPendingMessages, queryRunContext } from './run-queries';
export {
  type SubagentWorker,
  type SubagentWorkerOptions,
  bundleSubagentWorkflows,
  createSubagentWorker,
  subagentSinks,
} from './worker';
