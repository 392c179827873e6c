// Every side effect of a run lives here. `createActivities` receives its dependencies: the hosted
// providers, a way to fetch a run's context from its workflow, and the worker-side cache.
import { randomUUID } from 'node:crypto';
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import type {
  ContentBlock,
  RunContextSnapshot,
  SubagentTurnResult,
  TurnActivityInput,
  TurnActivityResult,
} from './contracts';
import type { SubagentTurnContext, SubagentTurnProvider } from './provider';
import { CachedRunContext, RunContextCache } from './run-context-cache';
import { createStructuredOutputRuntime } from './structured-output';
import { StructuredOutputSchema, validateStructuredValue } from '../src/schema';

export interface ActivityDependencies {
  providers: ReadonlyMap<string, SubagentTurnProvider>;
  /** Reads the run's request and conversation from its workflow (a query: nothing is recorded). */
  fetchRunContext(runId: string): Promise<RunContextSnapshot>;
  cache?: RunContextCache;
  /** How often the host heartbeats while a turn runs; cancellation arrives with heartbeats. */
  heartbeatIntervalMs?: number;
  /** How long a cancelled provider may take to stop before the turn reports cancellation anyway. */
  cancelGraceMs?: number;
  maxPayloadBytes: number;
}

export function createActivities(deps: ActivityDependencies) {
  const cache = deps.cache ?? new RunContextCache();
  const heartbeatIntervalMs = deps.heartbeatIntervalMs ?? 1000;
  const cancelGraceMs = deps.cancelGraceMs ?? 10_000;

  async function runContext(input: TurnActivityInput): Promise<CachedRunContext> {
    const cached = cache.lookup(input.runId, input.transcript);
    if (cached) return cached;
    const fresh: CachedRunContext =
      input.request && input.transcript.length === 0
        ? { request: input.request, entries: [] }
        : await deps.fetchRunContext(input.runId);
    // A fetched conversation may already hold this turn's messages; keep only what came before it.
    fresh.entries = fresh.entries.slice(0, input.transcript.length);
    cache.put(input.runId, fresh);
    return fresh;
  }

  return {
    /**
     * One turn of a turn-based provider. Resolves with the turn's output; a non-retryable failure
     * (unknown provider, output over the payload limit) fails at once, a cancelled run reports
     * cancellation only after the provider has stopped (or `cancelGraceMs` passed).
     */
    async subagentTurn(input: TurnActivityInput): Promise<TurnActivityResult> {
      const provider = deps.providers.get(input.provider);
      if (!provider) {
        throw ApplicationFailure.nonRetryable(
          `this worker does not host provider "${input.provider}" (it hosts: ${[...deps.providers.keys()].join(', ')})`,
          'NO_PROVIDER',
        );
      }
      const activity = Context.current();
      let cancellation: CancelledFailure | undefined;
      activity.cancelled.catch((err: CancelledFailure) => {
        cancellation = err;
      });
      // Heartbeat from the first moment: fetching the context may wait on the workflow's worker.
      let details: unknown = activity.info.heartbeatDetails;
      activity.heartbeat(details);
      const heartbeat = setInterval(() => activity.heartbeat(details), heartbeatIntervalMs);
      try {
        const context = await runContext(input);
        const schema = context.request.outputSchema as StructuredOutputSchema | undefined;
        const structuredOutput =
          schema && provider.capabilities.outputSchema ? createStructuredOutputRuntime(schema) : undefined;
        const turnContext: SubagentTurnContext = {
          runId: input.runId,
          segment: input.segment,
          turn: input.turn,
          attempt: activity.info.attempt,
          request: context.request,
          signal: activity.cancellationSignal,
          transcript: async () => context.entries,
          heartbeat: (progress) => {
            details = progress;
            activity.heartbeat(progress);
          },
          lastHeartbeat: activity.info.heartbeatDetails,
          ...(structuredOutput ? { structuredOutput } : {}),
        };
        const turn = provider.runTurn(input.input, turnContext);
        const returned = await untilStoppedOrGrace(turn, activity.cancellationSignal, cancelGraceMs);
        if (cancellation) throw cancellation;
        const result = withStructured(returned, schema, structuredOutput?.captured);
        const size = Buffer.byteLength(JSON.stringify(result));
        if (size > deps.maxPayloadBytes) {
          throw ApplicationFailure.nonRetryable(
            `provider "${input.provider}" produced a ${size}-byte turn output; the limit is ${deps.maxPayloadBytes} bytes`,
            'PAYLOAD_TOO_LARGE',
          );
        }
        const outputId = randomUUID();
        const appended = [
          ...input.input.map((content: ContentBlock[]) => ({ kind: 'user' as const, content })),
          { kind: 'assistant' as const, id: outputId, content: result.output, stopReason: result.stopReason },
        ];
        cache.put(input.runId, { request: context.request, entries: [...context.entries, ...appended] });
        return { ...result, outputId };
      } catch (err) {
        // Whatever the provider threw on its way out of a cancelled turn, the turn was cancelled.
        throw cancellation ?? err;
      } finally {
        clearInterval(heartbeat);
      }
    },
  };
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

/** The turn's result; once `signal` aborts, at most `graceMs` more of waiting for the provider. */
async function untilStoppedOrGrace<T>(turn: Promise<T>, signal: AbortSignal, graceMs: number): Promise<T> {
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
    return await Promise.race([turn, graceOver]);
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
