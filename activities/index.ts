// Every side effect of a run lives here. `createActivities` receives its dependencies: the hosted
// providers, a way to fetch a run's context from its workflow, and the worker-side cache. Every
// activity heartbeats from its first moment and reports cancellation only once its work stopped.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import OpenAI from 'openai';
import { StructuredOutputSchema, validateStructuredValue } from '../src/schema';
import type {
  ContentBlock,
  ModelCallInput,
  ModelCallResult,
  ResolvedSubagentRequest,
  RunContextSnapshot,
  SubagentTurnResult,
  ToolActivityInput,
  TranscriptEntry,
  TurnActivityInput,
  TurnActivityResult,
} from './contracts';
import type { ToolCallOutcome } from './structured-output';
import { delegationOf } from './delegation';
import { callModel } from './model-call';
import type {
  SubagentAgentProvider,
  SubagentDelegate,
  SubagentDelegatingRun,
  SubagentHostedProvider,
  SubagentTurnContext,
  SubagentTurnProvider,
} from './provider';
import { CachedRunContext, RunContextCache } from './run-context-cache';
import { createStructuredOutputRuntime } from './structured-output';

export interface ActivityDependencies {
  providers: ReadonlyMap<string, SubagentHostedProvider>;
  /** Reads the run's request and conversation from its workflow (a query: nothing is recorded). */
  fetchRunContext(runId: string): Promise<RunContextSnapshot>;
  /** Reads the messages waiting for the run's next turn from its workflow (a query). */
  fetchPendingMessages(runId: string): Promise<ContentBlock[][]>;
  cache?: RunContextCache;
  /** How often the host heartbeats while an activity runs; cancellation arrives with heartbeats. */
  heartbeatIntervalMs?: number;
  /** How long cancelled work may take to stop before the activity reports cancellation anyway. */
  cancelGraceMs?: number;
  maxPayloadBytes: number;
  /** Longest tool output handed back to the model; longer output is cut with a note. */
  maxToolOutputBytes?: number;
  /** Offered to providers as `context.delegate`: nested runs through the worker's service. */
  delegate?: SubagentDelegate;
}

/** Names the activities take in history besides the tools' own. */
export const RESERVED_ACTIVITY_NAMES = ['subagentTurn', 'subagentModelCall'];

export function createActivities(deps: ActivityDependencies) {
  const cache = deps.cache ?? new RunContextCache();
  const heartbeatIntervalMs = deps.heartbeatIntervalMs ?? 1000;
  const cancelGraceMs = deps.cancelGraceMs ?? 10_000;
  const maxToolOutputBytes = deps.maxToolOutputBytes ?? 256 * 1024;
  const clients = new Map<string, OpenAI>();

  /** Runs `work` heartbeating; a cancelled activity reports cancellation whatever `work` threw. */
  async function heartbeating<T>(work: (setDetails: (details: unknown) => void) => Promise<T>): Promise<T> {
    const activity = Context.current();
    let cancellation: CancelledFailure | undefined;
    activity.cancelled.catch((err: CancelledFailure) => {
      cancellation = err;
    });
    // From the first moment, fetching the run's context included (it may wait on the workflow's
    // worker). A turn shorter than one interval sends no heartbeat at all.
    let details: unknown = activity.info.heartbeatDetails;
    const timer = setInterval(() => activity.heartbeat(details), heartbeatIntervalMs);
    const setDetails = (progress: unknown) => {
      details = progress;
      activity.heartbeat(progress);
    };
    try {
      const result = await untilStoppedOrGrace(work(setDetails), activity.cancellationSignal, cancelGraceMs);
      if (cancellation) throw cancellation;
      return result;
    } catch (err) {
      throw cancellation ?? err;
    } finally {
      clearInterval(timer);
    }
  }

  /** The run's request and its conversation before `ref`: the worker's cache if it is exact, else the workflow's. */
  async function runContext(
    runId: string,
    ref: TurnActivityInput['transcript'],
    request: TurnActivityInput['request'],
  ): Promise<CachedRunContext> {
    const cached = cache.lookup(runId, ref);
    if (cached) return cached;
    const fresh: CachedRunContext =
      request && ref.length === 0 ? { request, entries: [] } : await deps.fetchRunContext(runId);
    // A fetched conversation may already hold later entries; keep only what came before `ref`.
    fresh.entries = fresh.entries.slice(0, ref.length);
    cache.put(runId, fresh);
    return fresh;
  }

  function hosted<K extends 'turns' | 'agent-loop'>(name: string, driver: K) {
    const provider = deps.providers.get(name);
    if (!provider || (provider.driver ?? 'turns') !== driver) {
      throw ApplicationFailure.nonRetryable(
        `this worker does not host ${driver} provider "${name}" (it hosts: ${[...deps.providers.keys()].join(', ')})`,
        'NO_PROVIDER',
      );
    }
    return provider as K extends 'turns' ? SubagentTurnProvider : SubagentAgentProvider;
  }

  function assertWithinLimit(value: unknown, what: string): void {
    const size = Buffer.byteLength(JSON.stringify(value));
    if (size > deps.maxPayloadBytes) {
      throw ApplicationFailure.nonRetryable(`${what} is ${size} bytes; the limit is ${deps.maxPayloadBytes} bytes`, 'PAYLOAD_TOO_LARGE');
    }
  }

  function clientFor(provider: SubagentAgentProvider): OpenAI {
    let client = clients.get(provider.name);
    if (!client) {
      const { baseURL, apiKey } = provider.endpoint;
      // Local endpoints (Ollama, vLLM) take any key; the client insists on one.
      client = new OpenAI({ baseURL, apiKey: apiKey || 'unused', maxRetries: 0 });
      clients.set(provider.name, client);
    }
    return client;
  }

  const activities: Record<string, (input: never) => Promise<unknown>> & {
    subagentTurn(input: TurnActivityInput): Promise<TurnActivityResult>;
    subagentModelCall(input: ModelCallInput): Promise<ModelCallResult>;
  } = {
    /**
     * One turn of a turn-based provider. Resolves with the turn's output; a non-retryable failure
     * (unknown provider, output over the payload limit) fails at once, a cancelled run reports
     * cancellation only after the provider has stopped (or `cancelGraceMs` passed).
     */
    async subagentTurn(input: TurnActivityInput): Promise<TurnActivityResult> {
      const provider = hosted(input.provider, 'turns');
      return heartbeating(async (setDetails) => {
        const activity = Context.current();
        const context = await runContext(input.runId, input.transcript, input.request);
        const schema = context.request.outputSchema as StructuredOutputSchema | undefined;
        const structuredOutput = schema && provider.capabilities.outputSchema ? createStructuredOutputRuntime(schema) : undefined;
        // Messages handed out mid-turn stay queued in the workflow until this turn's result
        // lands, so a retried turn sees them again; `consumed` says how many were taken.
        let consumed = 0;
        const taken: ContentBlock[][] = [];
        const turnContext: SubagentTurnContext = {
          runId: input.runId,
          segment: input.segment,
          turn: input.turn,
          attempt: activity.info.attempt,
          request: context.request,
          signal: activity.cancellationSignal,
          transcript: async () => context.entries,
          providerState: input.providerState,
          takeMessages: async () => {
            const fresh = (await deps.fetchPendingMessages(input.runId)).slice(consumed);
            consumed += fresh.length;
            taken.push(...fresh);
            return fresh;
          },
          heartbeat: setDetails,
          lastHeartbeat: activity.info.heartbeatDetails,
          ...(structuredOutput ? { structuredOutput } : {}),
          ...(deps.delegate
            ? {
                delegate: (nested, request) =>
                  deps.delegate!(nested, request, delegatingRun(input.runId, context.request, activity.cancellationSignal)),
              }
            : {}),
        };
        const returned = await provider.runTurn(input.input, turnContext);
        const result = withStructured(returned, schema, structuredOutput?.captured);
        assertWithinLimit(result, `provider "${input.provider}" produced a turn output that`);
        const outputId = randomUUID();
        cache.put(input.runId, {
          request: context.request,
          entries: [
            ...context.entries,
            ...[...input.input, ...taken].map((content): TranscriptEntry => ({ kind: 'user', content })),
            { kind: 'assistant', id: outputId, content: result.output, stopReason: result.stopReason },
          ],
        });
        return { ...result, outputId, consumedMessages: consumed };
      });
    },

    /**
     * One model call of an agent-loop provider with the run's whole conversation, rebuilt from
     * the worker's cache (or the workflow) plus the input's delta. See `callModel` for outcomes.
     */
    async subagentModelCall(input: ModelCallInput): Promise<ModelCallResult> {
      const provider = hosted(input.provider, 'agent-loop');
      return heartbeating(async () => {
        const context = await runContext(input.runId, input.transcript, input.request);
        const conversation = [...context.entries, ...input.delta];
        const outcome = await callModel(clientFor(provider), provider, context.request, conversation, Context.current().cancellationSignal);
        assertWithinLimit(outcome, 'the model response');
        const outputId = randomUUID();
        cache.put(input.runId, {
          request: context.request,
          entries: [...conversation, { kind: 'assistant', id: outputId, content: outcome.content, stopReason: outcome.stopReason }],
        });
        return { ...outcome, outputId };
      });
    },
  };

  // One activity per tool, named after it, so history reads as the child's actions.
  for (const provider of deps.providers.values()) {
    if (provider.driver !== 'agent-loop') continue;
    for (const tool of provider.tools) {
      activities[tool.name] = (async (input: ToolActivityInput): Promise<ToolCallOutcome> => {
        const owner = hosted(input.provider, 'agent-loop');
        const implementation = owner.tools.find((candidate) => candidate.name === tool.name) ?? tool;
        return heartbeating(async () => {
          let args: unknown;
          try {
            args = input.arguments.trim() === '' ? {} : JSON.parse(input.arguments);
          } catch {
            return errorOutcome(`invalid arguments: not JSON (${input.arguments.slice(0, 200)})`);
          }
          const signal = Context.current().cancellationSignal;
          const parent = { runId: input.runId, signal, ...input.delegation, ...(input.cwd === undefined ? {} : { cwd: input.cwd }) };
          const outcome = await implementation.execute(args, {
            cwd: input.cwd,
            signal,
            runId: input.runId,
            callId: input.callId,
            ...(deps.delegate ? { delegate: (nested, request) => deps.delegate!(nested, request, parent) } : {}),
          });
          return truncated(outcome, maxToolOutputBytes);
        });
      }) as (input: never) => Promise<unknown>;
    }
  }
  return activities;
}

/** This run as the parent of the runs it delegates: its depth, cap, cwd and model. */
function delegatingRun(runId: string, request: ResolvedSubagentRequest, signal: AbortSignal): SubagentDelegatingRun {
  return { runId, signal, ...delegationOf(request), ...(request.parent.cwd === undefined ? {} : { cwd: request.parent.cwd }) };
}

/**
 * The turn result with `structured` set only from a valid capture: the runtime's, or one the
 * provider captured itself (a hosted seam provider), checked against the run's schema here.
 */
function withStructured(
  result: SubagentTurnResult,
  schema: StructuredOutputSchema | undefined,
  captured: { value: unknown } | undefined,
): SubagentTurnResult {
  const { structured, ...rest } = result;
  if (!schema) return rest;
  if (captured) return { ...rest, structured: captured.value };
  if (structured === undefined) return rest;
  const violations = validateStructuredValue(schema, structured);
  if (violations.length === 0) return { ...rest, structured };
  return { ...rest, stopReason: 'error', diagnostic: `the provider's structured result is invalid: ${violations.join('; ')}` };
}

function errorOutcome(message: string): ToolCallOutcome {
  return { isError: true, content: [{ type: 'text', text: `Error: ${message}` }] };
}

/** Cuts each text block so the whole outcome stays within `maxBytes`, saying how much was cut. */
function truncated(outcome: ToolCallOutcome, maxBytes: number): ToolCallOutcome {
  let budget = maxBytes;
  const content = outcome.content.map((block): ContentBlock => {
    if (block.type !== 'text') return block;
    const bytes = Buffer.from(block.text);
    if (bytes.length <= budget) {
      budget -= bytes.length;
      return block;
    }
    const kept = bytes.subarray(0, Math.max(budget, 0)).toString('utf8');
    budget = 0;
    return { type: 'text', text: `${kept}\n[output truncated: ${bytes.length - Buffer.byteLength(kept)} more bytes]` };
  });
  return { ...outcome, content };
}

/** The work's result; once `signal` aborts, at most `graceMs` more of waiting for it. */
async function untilStoppedOrGrace<T>(work: Promise<T>, signal: AbortSignal, graceMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  // Rejects only if the grace runs out while the race is on, so it never rejects unobserved.
  const graceOver = new Promise<never>((_, reject) => {
    onAbort = () => {
      timer = setTimeout(() => reject(signal.reason), graceMs);
    };
  });
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  try {
    return await Promise.race([work, graceOver]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
  }
}

export type SubagentActivities = ReturnType<typeof createActivities>;
export { RunContextCache } from './run-context-cache';
export type * from './contracts';
export type * from './provider';
export * from './structured-output';
