// The seam's model-facing consumer: a `subagent` tool a parent LLM agent calls to delegate. It
// starts a durable run, bridges the caller's abort signal to `cancel`, awaits the result,
// disposes on every path, and turns every outcome into a tool result, never a throw. Framework
// neutral; adapters give it the OpenAI chat-completions and Vercel AI SDK shapes.
import { textContent, textOf } from '../seam/content';
import { SubagentError } from '../seam/errors';
import type { SubagentAgentOptions, SubagentNestedStartRequest, SubagentParent } from '../seam/request';
import type { SubagentApprovalAnswer, SubagentRun, SubagentRunEvent } from '../seam/run';
import { type ToolCallOutcome, toolError, toolResult } from '../seam/tool';
import { spendOf } from '../seam/budget';
import { runStarted } from './run-handle';
import type { TemporalSubagentService } from './service';

export const SUBAGENT_TOOL_NAME = 'subagent';
export const SUBAGENT_RESULT_TOOL_NAME = 'subagent_result';

export interface SubagentToolConfig {
  /** The provider every call delegates to. Its descriptor decides the wording. */
  provider: string;
  /** Default `subagent`; use another (`subagent_fork`) to offer several providers. */
  name?: string;
  agentOptions?: SubagentAgentOptions;
  /** Ask the child for a structured result; the model sees it rendered as JSON. */
  outputSchema?: Record<string, unknown>;
  /** Cap on the delegation depth of the runs this tool starts. */
  maxDepth?: number;
  /**
   * Return at once with the run id instead of waiting; collect the answer with the companion
   * `subagent_result` tool. The run goes on durably whatever happens to the caller.
   */
  background?: boolean;
}

export interface SubagentToolCallContext {
  /** The agent whose model called the tool: it becomes the run's parent. */
  parent?: SubagentParent;
  /** The caller's step: aborting it cancels the run (foreground) or stops waiting (result tool). */
  signal?: AbortSignal;
  /**
   * Called with each progress event of the run and of the runs it delegates to, while the tool
   * waits for its result (foreground only). A throw is ignored.
   */
  onProgress?: (event: SubagentRunEvent) => void;
  /**
   * Answers the tool calls the run, or any run below it, holds for approval, while the tool waits
   * (foreground only): the parent deciding for its children. Undefined leaves a request to others
   * (`subagents approve`) or to its timeout; a throw is ignored likewise.
   */
  onApproval?: (
    request: SubagentApprovalRequestedEvent,
  ) => SubagentApprovalAnswer | undefined | Promise<SubagentApprovalAnswer | undefined>;
}

/** An `approval-requested` event: which run asks, and for what. */
export type SubagentApprovalRequestedEvent = Extract<SubagentRunEvent, { type: 'approval-requested' }>;

/** JSON Schema of the tool's parameters, as the model sees it. */
export interface SubagentToolParameters {
  type: 'object';
  properties: Record<string, { type: 'string'; description: string }>;
  required: string[];
  additionalProperties: false;
}

/** A tool definition any agent framework can adapt: name, description, parameters, execute. */
export interface SubagentToolDefinition {
  readonly name: string;
  readonly description: string;
  readonly parameters: SubagentToolParameters;
  /** Never rejects: every failure is an `isError` result. */
  execute(args: unknown, context: SubagentToolCallContext): Promise<ToolCallOutcome>;
}

/** What a tool needs of the service: start a run, or attach to one by id. */
export type SubagentStarter = Pick<TemporalSubagentService, 'start' | 'attach' | 'getProvider'>;

const DESCRIPTION_PARAMETER = 'A short (3-5 word) description of the delegated task, for display.';

/**
 * The model-facing delegation tool for one provider. Throws `NO_PROVIDER` when the provider is
 * not registered with `service`, since its wording depends on the provider's context contract.
 */
export function createSubagentTool(service: SubagentStarter, config: SubagentToolConfig): SubagentToolDefinition {
  const provider = service.getProvider(config.provider);
  if (!provider) {
    throw new SubagentError(
      `no subagent provider registered for "${config.provider}"; register it before creating its tool`,
      'NO_PROVIDER',
    );
  }
  const wording = subagentToolWording(provider.inheritsParentContext, config.background ?? false);
  return {
    name: config.name ?? SUBAGENT_TOOL_NAME,
    description: wording.description,
    parameters: delegationParameters(wording.prompt),
    async execute(args, context) {
      const parsed = delegationArgs(args);
      if ('error' in parsed) return parsed.error;
      if (!context.parent) return toolError('subagent tool requires a calling agent (context.parent was undefined)');
      const parent = context.parent;
      // The wording promised this conversation's completed turns, which come only from the
      // parent's log, to a provider that inherits it: a parent that hands none, or a provider
      // registered again since as one that does not inherit, starts the child from the prompt
      // alone, and the model is told so with the answer (the wording is fixed at creation).
      const seeded = service.getProvider(config.provider)?.inheritsParentContext === true && hasSessionLog(parent);
      const notice = provider.inheritsParentContext && !seeded ? UNSEEDED_NOTICE : undefined;
      return delegate(
        (request) => service.start(config.provider, { ...request, parent }),
        parsed.prompt,
        config,
        context.signal,
        { ...context, ...(notice ? { notice } : {}) },
      );
    },
  };
}

/** What a fork's answer carries when the calling agent handed it no conversation to inherit. */
export const UNSEEDED_NOTICE =
  'Note: this subagent did not see this conversation after all (the calling agent gave it no conversation log): it worked from your prompt alone.';

/**
 * Whether the parent hands a session log a fork is seeded from (`session.events`, even an empty
 * one: no completed turn is then all there is to see). A log that cannot be read counts as one:
 * the start refuses it.
 */
function hasSessionLog(parent: SubagentParent): boolean {
  try {
    return parent.session?.events !== undefined;
  } catch {
    return true;
  }
}

/** Marks the tools `createSubagentResultTool` makes; a copy made of one (`{ ...tool }`) keeps the mark. */
const RESULT_TOOL = Symbol('subagent.resultTool');

/** Whether `tool` collects background runs' answers: one `createSubagentResultTool` made, or a copy of one. */
export function isSubagentResultTool(tool: object): boolean {
  return (tool as { [RESULT_TOOL]?: boolean })[RESULT_TOOL] === true;
}

/**
 * The companion of a background `subagent` tool: waits for a run by id (from any process, the
 * one that started it may be gone), renders its result like the tool would, and disposes it.
 */
export function createSubagentResultTool(
  service: SubagentStarter,
  config: Pick<SubagentToolConfig, 'outputSchema'> & { name?: string } = {},
): SubagentToolDefinition {
  return Object.assign(resultTool(service, config), { [RESULT_TOOL]: true });
}

function resultTool(
  service: SubagentStarter,
  config: Pick<SubagentToolConfig, 'outputSchema'> & { name?: string },
): SubagentToolDefinition {
  return {
    name: config.name ?? SUBAGENT_RESULT_TOOL_NAME,
    description: 'Collect the final answer of a subagent started in the background. Waits until it has finished.',
    parameters: {
      type: 'object',
      properties: { run_id: { type: 'string', description: 'The run id the subagent tool returned.' } },
      required: ['run_id'],
      additionalProperties: false,
    },
    async execute(args, context) {
      const runId = (args as { run_id?: unknown } | null)?.run_id;
      if (typeof runId !== 'string') return toolError('invalid arguments: "run_id" must be a string');
      let run: SubagentRun;
      try {
        run = service.attach(runId);
      } catch (err) {
        return toolError((err as Error).message);
      }
      // Stop waiting with the caller's step; the run itself goes on, to be collected again.
      let gaveUp = false;
      const stopped = new Promise<ToolCallOutcome>((resolve) => {
        const stop = () => {
          gaveUp = true;
          resolve(toolError(`stopped waiting for subagent run ${runId}; it is still running`));
        };
        if (context.signal?.aborted) stop();
        else context.signal?.addEventListener('abort', stop, { once: true });
      });
      const outcome = await Promise.race([settle(run, config), stopped]);
      if (!gaveUp) await run.dispose().catch(() => undefined); // the run logs a failed dispose
      return outcome;
    },
  };
}

/**
 * The tool's wording, truthful about whether the child sees this conversation (seam §6) and, in
 * the background, about how its answer comes back: `collectable`, the name of the tool the model
 * collects it with (true: `subagent_result`), or false when it has none.
 */
export function subagentToolWording(
  inheritsParentContext: boolean,
  background = false,
  collectable: boolean | string = true,
): { description: string; prompt: string } {
  const collector = resultToolName(collectable);
  const answer = !background
    ? 'You receive only its final answer.'
    : collector
      ? `The call returns a run id at once; collect the final answer later with ${collector}.`
      : `The call returns a run id at once; the subagent works on by itself, and its answer does not come back to you.`;
  return inheritsParentContext
    ? {
        description: `Delegate a task to a subagent that INHERITS this conversation: a child agent seeded with all completed turns so far (it does not see the current in-flight turn). ${answer}`,
        prompt:
          "The task for the subagent. It already sees this conversation's completed turns, so build on them freely and state only what is new.",
      }
    : {
        description: `Delegate a self-contained task to a subagent (a separate agent that works in its own context). ${answer} Give it a complete, standalone prompt: it does not see this conversation.`,
        prompt:
          "The task for the subagent. It does not share this conversation's context, so include everything it needs.",
      };
}

/** The name of the tool that collects a background run's answer, as `collectable` gives it; undefined for none. */
function resultToolName(collectable: boolean | string): string | undefined {
  return collectable === true ? SUBAGENT_RESULT_TOOL_NAME : collectable === false ? undefined : collectable;
}

export function delegationParameters(promptDescription: string): SubagentToolParameters {
  return {
    type: 'object',
    properties: {
      description: { type: 'string', description: DESCRIPTION_PARAMETER },
      prompt: { type: 'string', description: promptDescription },
    },
    required: ['description', 'prompt'],
    additionalProperties: false,
  };
}

/** The model's arguments, checked: `{ description, prompt }` strings (extra keys ignored). */
export function delegationArgs(args: unknown): { prompt: string } | { error: ToolCallOutcome } {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    return { error: toolError('invalid arguments: expected an object with "description" and "prompt"') };
  }
  const record = args as Record<string, unknown>;
  for (const key of ['description', 'prompt']) {
    if (record[key] === undefined) return { error: toolError(`invalid arguments: missing required property "${key}"`) };
    if (typeof record[key] !== 'string') return { error: toolError(`invalid arguments: "${key}" must be a string`) };
  }
  return { prompt: record.prompt as string };
}

/**
 * Starts a run with `start`, then either returns its id (background) or waits for it: the
 * caller's abort cancels it, and it is disposed on every path.
 */
export async function delegate(
  start: (request: SubagentNestedStartRequest) => SubagentRun,
  prompt: string,
  config: Omit<SubagentToolConfig, 'provider' | 'name'>,
  signal: AbortSignal | undefined,
  {
    onProgress,
    onApproval,
    reportSpend = false,
    notice,
    collectable = true,
  }: Pick<SubagentToolCallContext, 'onProgress' | 'onApproval'> & {
    reportSpend?: boolean;
    notice?: string;
    /**
     * In the background: the name of the tool the model collects the answer with (true:
     * `subagent_result`), or false when it has none.
     */
    collectable?: boolean | string;
  } = {},
): Promise<ToolCallOutcome> {
  let run: SubagentRun;
  try {
    run = start({
      prompt: textContent(prompt),
      ...(config.agentOptions ? { agentOptions: config.agentOptions } : {}),
      ...(config.outputSchema ? { outputSchema: config.outputSchema } : {}),
      ...(config.maxDepth === undefined ? {} : { maxDepth: config.maxDepth }),
      // A background run outlives the step that started it.
      ...(signal && !config.background ? { signal } : {}),
    });
  } catch (err) {
    return toolError((err as Error).message);
  }
  if (config.background) {
    run.result.catch(() => undefined); // collected by subagent_result, in this process or another
    try {
      // The id is worth handing out only once the run exists: then it outlives this process.
      await runStarted(run);
    } catch (err) {
      return toolError((err as Error).message);
    }
    const collector = resultToolName(collectable);
    const collect = collector
      ? `Call ${collector} with run_id "${run.id}" to collect its answer.`
      : 'It works on by itself; its answer does not come back to you.';
    return noted(toolResult(`Started subagent run ${run.id}. ${collect}`), notice);
  }
  // An already-aborted signal cancels at once: a listener would never fire.
  const onAbort = () => run.cancel('parent step aborted');
  if (signal?.aborted) onAbort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  const watched = onProgress || onApproval;
  const watching =
    watched && run.events
      ? forward(run, run.events({ nested: true }), (event) => {
          onProgress?.(event);
          if (event.type === 'approval-requested' && onApproval) void answer(run, event, onApproval);
        })
      : undefined;
  try {
    const outcome = noted(await settle(run, config), notice);
    // Inside a run (the delegation tool), what the nested run spent is charged to the calling run.
    const spend = reportSpend ? spendOf(run) : undefined;
    return spend ? { ...outcome, nestedSpend: { [run.id]: spend } } : outcome;
  } finally {
    await watching?.stop();
    signal?.removeEventListener('abort', onAbort);
    await run.dispose().catch(() => undefined); // the run logs a failed dispose
  }
}

/** `outcome` with `notice`, when there is one, as a text block after its own. */
function noted(outcome: ToolCallOutcome, notice: string | undefined): ToolCallOutcome {
  return notice ? { ...outcome, content: [...outcome.content, { type: 'text', text: `\n\n${notice}` }] } : outcome;
}

/** The parent's answer to a request of its tree, if it gives one; a failure leaves the request waiting. */
async function answer(
  run: SubagentRun,
  request: SubagentApprovalRequestedEvent,
  onApproval: NonNullable<SubagentToolCallContext['onApproval']>,
): Promise<void> {
  try {
    const decision = await onApproval(request);
    if (decision !== undefined) await run.approve?.(request.requestId, decision);
  } catch {
    // Someone else (`subagents approve`) or the timeout decides it.
  }
}

/** How long a finished delegation waits for its progress to catch up with its result. */
const PROGRESS_CATCH_UP_MS = 2000;

/**
 * Hands each event to `onProgress` (a throw is ignored) until `stop`, which first lets the events
 * catch up with the run's settle point (for at most PROGRESS_CATCH_UP_MS): its result and its
 * events are read apart. The stream ends by itself once the run closes; an event that comes after
 * `stop` is not handed on.
 */
function forward(
  run: SubagentRun,
  events: AsyncIterable<SubagentRunEvent>,
  onProgress: (event: SubagentRunEvent) => void,
) {
  let stopped = false;
  let caughtUp!: () => void;
  const settled = new Promise<void>((resolve) => (caughtUp = resolve));
  void (async () => {
    for await (const event of events) {
      if (stopped) return;
      try {
        onProgress(event);
      } catch {
        // The caller's display failing is no reason to fail the delegation.
      }
      if (event.type === 'settled' && event.runId === run.id) caughtUp();
    }
  })()
    .catch(() => undefined)
    .finally(caughtUp);
  return {
    async stop() {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([settled, new Promise((resolve) => (timer = setTimeout(resolve, PROGRESS_CATCH_UP_MS)))]);
      clearTimeout(timer);
      stopped = true;
    },
  };
}

/** The run's result as the model sees it: the answer, or a fixed message naming what went wrong. */
async function settle(run: SubagentRun, config: Pick<SubagentToolConfig, 'outputSchema'>): Promise<ToolCallOutcome> {
  let result;
  try {
    result = await run.result;
  } catch (err) {
    return toolError(`subagent run failed before producing a result: ${(err as Error).message}`);
  }
  if (result.stopReason !== 'completed') {
    const diagnostic = result.diagnostic ? `\nDiagnostic: ${result.diagnostic}` : '';
    const headline = STOP_MESSAGES.get(result.stopReason) ?? `subagent run ended abnormally (${result.stopReason})`;
    return toolError(`${headline}${diagnostic}`);
  }
  if (config.outputSchema && result.structured !== undefined) return toolResult(JSON.stringify(result.structured));
  return toolResult(textOf(result.output));
}

/** Fixed messages per stop reason; any other reason is a failure named as such. */
const STOP_MESSAGES = new Map<string, string>([
  ['aborted', 'subagent run was cancelled'],
  ['error', 'subagent run failed'],
  ['max-tokens', 'subagent run hit its token limit before finishing'],
  ['refusal', 'subagent declined the task'],
]);
