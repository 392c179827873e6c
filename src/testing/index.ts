// `durable-subagents/testing`: the kit for testing delegations against a real Temporal server
// without a model or an agent to pay for. Every double here is named as one.
export { ACP_TEST_AGENT_ENTRY, acpTestAgentCommand } from './acp-command';
export type { AcpAgentScript, AcpScriptedTurn } from './acp-test-agent';
export {
  type FakeChatRequest,
  type FakeHandler,
  type FakeOpenAI,
  type FakeReply,
  type StreamHold,
  errorReply,
  hangReply,
  refusalReply,
  startFakeOpenAI,
  textReply,
  toolCallReply,
} from './fake-model-server';
export {
  type ReadyProcess,
  type SpawnOptions,
  WORKER_PROCESS_ENTRY,
  spawnReadyProcess,
  spawnWorkerProcess,
} from './processes';
export { type TestPostgres, startTestPostgres } from './postgres';
export { replayHistoryFile } from './replay';
export {
  DEFAULT_SCRIPTED_REPLY,
  type ScriptedAgentOptions,
  type ScriptedProviderOptions,
  type ScriptedTurn,
  type ScriptedTurnEvent,
  createScriptedProvider,
} from '../providers/scripted';
export {
  type DevServer,
  type DevServerOptions,
  freePort,
  resolveTemporalBinary,
  startDevServer,
} from '../temporal/dev-server';
