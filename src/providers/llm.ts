// `spawn` and `fork`: LLM child agents on any OpenAI-compatible chat-completions endpoint
// (OpenAI, DeepSeek, vLLM, Ollama, LM Studio). The run workflow drives their loop: each model
// call and each tool call is an activity, so a crash costs at most the call in flight. `spawn`
// starts fresh; `fork` is seeded with the parent's conversation up to its last completed turn.
import type { SubagentAgentProvider, SubagentModelEndpoint, SubagentRunSettings } from '../seam/provider';
import { isHttpUrl } from '../seam/constants';
import { SubagentError } from '../seam/errors';
import type { SubagentTool } from '../seam/tool';
import { builtinFileTools } from '../tools';
import { defaultSystemPrompt, withDefaultSystemPrompt } from '../../activities/system-prompt';
import { envFlag } from '../temporal/env';

export interface LlmProviderOptions {
  /** Default `spawn` / `fork`. */
  name?: string;
  /** Default: `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `SUBAGENT_MODEL` from the environment. */
  endpoint?: SubagentModelEndpoint;
  /** Default: `defaultSystemPrompt` of the tools each model call offers. */
  systemPrompt?: string;
  /** Default: the built-in file tools confined to the run's cwd (read_file, list_directory, search_text). */
  tools?: readonly SubagentTool[];
  taskQueue?: string;
  runSettings?: SubagentRunSettings;
}

/** The default system prompt of a child with the default tools (`builtinFileTools()`). */
export const DEFAULT_SYSTEM_PROMPT = defaultSystemPrompt(builtinFileTools());

/**
 * The endpoint the environment configures: OPENAI_BASE_URL, OPENAI_API_KEY, SUBAGENT_MODEL,
 * SUBAGENT_MAX_CONTEXT_CHARS, SUBAGENT_MODEL_MAX_TOKENS, the quota's SUBAGENT_MODEL_REQUESTS_PER_MINUTE,
 * SUBAGENT_MODEL_TOKENS_PER_MINUTE and SUBAGENT_MODEL_TOKEN_BURST (each a positive whole number),
 * SUBAGENT_MODEL_STREAM (`true` or `false`; default true). Anything else is `INVALID_CONFIG`.
 */
export function endpointFromEnv(env: NodeJS.ProcessEnv = process.env): SubagentModelEndpoint {
  const whole = (name: string): number | undefined => {
    const value = env[name]?.trim();
    if (!value) return undefined;
    const number = Number(value);
    if (!(Number.isInteger(number) && number > 0)) {
      throw new SubagentError(`${name} must be a positive whole number (got "${value}")`, 'INVALID_CONFIG');
    }
    return number;
  };
  const limits = {
    maxContextChars: whole('SUBAGENT_MAX_CONTEXT_CHARS'),
    maxTokens: whole('SUBAGENT_MODEL_MAX_TOKENS'),
    requestsPerMinute: whole('SUBAGENT_MODEL_REQUESTS_PER_MINUTE'),
    tokensPerMinute: whole('SUBAGENT_MODEL_TOKENS_PER_MINUTE'),
    tokenBurst: whole('SUBAGENT_MODEL_TOKEN_BURST'),
  };
  const stream = envFlag(env, 'SUBAGENT_MODEL_STREAM', true);
  // Trimmed: a base URL with a space at its end asked for `/v1%20/chat/completions` (a 404 at
  // every call), and a model name with one names another model.
  const baseURL = env.OPENAI_BASE_URL?.trim();
  if (baseURL && !isHttpUrl(baseURL)) {
    throw new SubagentError(
      `OPENAI_BASE_URL must be an http or https URL, such as "http://localhost:8080/v1" (got "${baseURL}")`,
      'INVALID_CONFIG',
    );
  }
  const apiKey = env.OPENAI_API_KEY?.trim();
  const model = env.SUBAGENT_MODEL?.trim();
  return {
    ...(baseURL ? { baseURL } : {}),
    ...(stream ? {} : { stream: false }),
    ...(apiKey ? { apiKey } : {}),
    ...(model ? { model } : {}),
    ...Object.fromEntries(Object.entries(limits).filter(([, value]) => value !== undefined)),
  };
}

export function createSpawnProvider(options: LlmProviderOptions = {}): SubagentAgentProvider {
  return llmProvider(options.name ?? 'spawn', false, options);
}

export function createForkProvider(options: LlmProviderOptions = {}): SubagentAgentProvider {
  return llmProvider(options.name ?? 'fork', true, options);
}

function llmProvider(name: string, inheritsParentContext: boolean, options: LlmProviderOptions): SubagentAgentProvider {
  const tools = options.tools ?? builtinFileTools();
  const provider: SubagentAgentProvider = {
    name,
    driver: 'agent-loop',
    capabilities: { outputSchema: true, depthLimit: true, toolFilter: true },
    inheritsParentContext,
    steering: true,
    resumable: true,
    toolNames: tools.map((tool) => tool.name),
    endpoint: options.endpoint ?? endpointFromEnv(),
    systemPrompt: options.systemPrompt ?? defaultSystemPrompt(tools),
    tools,
    ...(options.taskQueue === undefined ? {} : { taskQueue: options.taskQueue }),
    ...(options.runSettings === undefined ? {} : { runSettings: options.runSettings }),
  };
  return options.systemPrompt === undefined ? withDefaultSystemPrompt(provider) : provider;
}
