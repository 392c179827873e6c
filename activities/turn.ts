// `subagentTurn`: one turn of a turn-based provider (scripted, acp, a hosted seam provider), with
// the turn context the provider works in: its conversation, mid-turn messages, heartbeats, the
// structured-output capture and nested delegation.
import { createHash } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { type ContentBlock, contentViolation } from '../src/seam/content';
import { type SubagentDelegatingRun, delegationOf, sessionLogOf } from '../src/seam/delegation';
import { describeValue, isPlainObject, jsonViolation } from '../src/seam/json';
import { spendOf } from '../src/seam/budget';
import type { SubagentTurnContext } from '../src/seam/provider';
import type { SubagentRun } from '../src/seam/run';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type { SubagentSpend, SubagentTurnResult } from '../src/seam/result';
import type { StructuredOutputSchema } from '../src/seam/structured';
import { createStructuredOutputRuntime } from '../src/structured/runtime';
import { validateStructuredValue } from '../src/structured/schema';
import { type ActivityHost, keyedDelegation, newEntryId, runOf } from './host';
import type { TurnActivityInput, TurnActivityResult } from './types';

/**
 * One turn of a turn-based provider. Resolves with the turn's output; a non-retryable failure
 * (unknown provider, output over the payload limit) fails at once, a cancelled run reports
 * cancellation only after the provider has stopped (or `cancelGraceMs` passed).
 */
export function turnActivity(host: ActivityHost): (input: TurnActivityInput) => Promise<TurnActivityResult> {
  const { deps } = host;
  return async function subagentTurn(input) {
    const provider = host.hosted(input.provider, 'turns');
    const runId = runOf(input);
    // A retried turn sends what its previous attempt heartbeated until its provider sends its own:
    // an ACP session id that the attempt after a crash must still find (`lastHeartbeat`).
    return host.heartbeating(
      async (setDetails) => {
        const activity = Context.current();
        const context = await host.conversation(
          runId,
          input.transcript,
          input.request,
          input.input
            ? { entries: input.input.map((content) => ({ kind: 'user', content })) }
            : { length: input.inputLength ?? 0 },
        );
        const turnInput = context.tail.flatMap((entry) => (entry.kind === 'user' ? [entry.content] : []));
        const schema = context.request.outputSchema as StructuredOutputSchema | undefined;
        const structuredOutput =
          schema && provider.capabilities.outputSchema ? createStructuredOutputRuntime(schema) : undefined;
        // Messages handed out mid-turn stay queued in the workflow until this turn's result
        // lands, so a retried turn sees them again; `consumed` says how many were taken.
        let consumed = 0;
        const taken: ContentBlock[][] = [];
        const publisher = host.textPublisher(runId, input.turn);
        const asking = fewAtOnce(MAX_ASKS_AT_ONCE, activity.cancellationSignal);
        const delegated: SubagentRun[] = [];
        // A retried turn that delegates as its earlier attempt did joins the runs that attempt started.
        const delegate =
          deps.delegate &&
          keyedDelegation(
            deps.delegate,
            delegatingRun(runId, context.request, activity.cancellationSignal, input.spent, context.entries),
            `${activity.info.workflowExecution?.runId ?? runId}/${activity.info.activityId}`,
          );
        const turnContext: SubagentTurnContext = {
          runId,
          segment: input.segment,
          turn: input.turn,
          attempt: activity.info.attempt,
          request: context.request,
          signal: activity.cancellationSignal,
          transcript: async () => context.entries,
          providerState: input.providerState,
          takeMessages: async () => {
            const fresh = deps.fetchPendingMessagesFrom
              ? await deps.fetchPendingMessagesFrom(runId, consumed)
              : (await deps.fetchPendingMessages(runId)).slice(consumed);
            consumed += fresh.length;
            taken.push(...fresh);
            return fresh;
          },
          heartbeat: setDetails,
          ...(deps.recordPermission ? { recordPermission: (decision) => deps.recordPermission!(runId, decision) } : {}),
          ...(deps.requestApproval
            ? {
                requestApproval: (call) =>
                  asking(() =>
                    deps.requestApproval!(
                      runId,
                      { turn: input.turn, key: approvalKey(call), ...call },
                      activity.cancellationSignal,
                    ),
                  ),
              }
            : {}),
          ...(publisher ? { streamText: publisher.add, streamReasoning: publisher.addReasoning } : {}),
          lastHeartbeat: activity.info.heartbeatDetails,
          ...(structuredOutput ? { structuredOutput } : {}),
          ...(delegate
            ? {
                delegate: (nested, request) => {
                  const run = delegate(nested, request);
                  delegated.push(run);
                  return run;
                },
              }
            : {}),
        };
        let returned: SubagentTurnResult;
        try {
          returned = await provider.runTurn(turnInput, turnContext);
        } finally {
          await publisher?.close();
        }
        const malformed = turnResultViolation(returned);
        const result: SubagentTurnResult = malformed
          ? {
              output: [],
              stopReason: 'error',
              diagnostic: `provider "${input.provider}" returned a malformed turn result: ${malformed}`,
            }
          : withStructured(returned, schema, structuredOutput?.captured);
        host.assertWithinLimit(result, `the turn output of provider "${input.provider}"`);
        const outputId = newEntryId();
        host.cache.put(runId, {
          request: context.request,
          entries: [
            ...context.entries,
            ...[...turnInput, ...taken].map((content): TranscriptEntry => ({ kind: 'user', content })),
            { kind: 'assistant', id: outputId, content: result.output, stopReason: result.stopReason },
          ],
        });
        // What the runs this turn delegated to spent, as each last settled, is charged to this run.
        const nestedSpend = Object.fromEntries(
          delegated.flatMap((run) => {
            const spend = spendOf(run);
            return spend ? [[run.id, spend]] : [];
          }),
        );
        return {
          ...result,
          outputId,
          consumedMessages: consumed,
          ...(Object.keys(nestedSpend).length > 0 ? { nestedSpend } : {}),
        };
      },
      { carryDetails: true },
    );
  };
}

/**
 * This run as the parent of the runs it delegates: its depth, cap, cwd and model, and its completed
 * turns (the conversation before this turn, `completed`), which a fork it delegates to is seeded with.
 */
function delegatingRun(
  runId: string,
  request: ResolvedSubagentRequest,
  signal: AbortSignal,
  spent: SubagentSpend | undefined,
  completed: readonly TranscriptEntry[],
): SubagentDelegatingRun {
  return {
    runId,
    signal,
    ...delegationOf(request, spent),
    ...(request.parent.cwd === undefined ? {} : { cwd: request.parent.cwd }),
    // Made when read, which `keyedDelegation` does at a turn's first delegation: most delegate nothing.
    get events() {
      return sessionLogOf(completed);
    },
  };
}

/**
 * Why a provider's turn result is not one (its provider's bug), or undefined. The workflow failed
 * every task of the run on an output of null, and a result of undefined was retried as a throw;
 * an output that is not content reached the caller as it was, and permissions that are not a list
 * failed the audit export. Any stop reason that is text passes: a backend may add its own (the
 * seam's consumers treat one they do not know as a failure).
 */
function turnResultViolation(result: unknown): string | undefined {
  if (!isPlainObject(result)) return `it must be an object (got ${describeValue(result)})`;
  const { output, stopReason, diagnostic, providerState, permissions } = result;
  if (!Array.isArray(output)) return `output must be an array of content blocks (got ${describeValue(output)})`;
  const outputViolation = output.length === 0 ? undefined : contentViolation(output, 'output');
  if (outputViolation) return outputViolation;
  if (!(typeof stopReason === 'string' && stopReason !== '')) return 'stopReason must be a non-empty string';
  if (!(diagnostic === undefined || typeof diagnostic === 'string')) return 'diagnostic must be a string';
  if (permissions !== undefined && !Array.isArray(permissions)) return 'permissions must be an array';
  return (
    (providerState === undefined ? undefined : jsonViolation(providerState, 'providerState')) ??
    (permissions === undefined ? undefined : jsonViolation(permissions, 'permissions'))
  );
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
  return {
    ...rest,
    stopReason: 'error',
    diagnostic: `the provider's structured result is invalid: ${violations.join('; ')}`,
  };
}

/**
 * The most approvals one turn asks its run for at once. Each ask is an update the run holds in
 * flight until someone answers, and the server lets a run have 10 in flight
 * (`history.maxInFlightUpdates`): past that it refuses every update, the answers (`approve`) and
 * `dispose` among them, so an agent that asked for 10 permissions at once could not be answered.
 */
export const MAX_ASKS_AT_ONCE = 4;

/**
 * Runs the calls given it `max` at a time, the rest waiting in order for one to end; a call still
 * waiting when `signal` aborts rejects with its reason, never run.
 */
function fewAtOnce(max: number, signal: AbortSignal): <T>(call: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (call) => {
    if (running < max) running++;
    else {
      // The call that ends hands its place on: `running` stays as it is.
      await new Promise<void>((resolve, reject) => {
        if (signal.aborted) return reject(signal.reason);
        const start = () => {
          signal.removeEventListener('abort', abort);
          resolve();
        };
        const abort = () => {
          waiting.splice(waiting.indexOf(start), 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', abort, { once: true });
        waiting.push(start);
      });
    }
    try {
      return await call();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/** The same call asked again (a retried attempt asks as the first did) has the same key. */
function approvalKey(call: { tool: string; arguments: string; kind?: string }): string {
  const digest = createHash('sha256').update(JSON.stringify([call.tool, call.kind ?? '', call.arguments]));
  return digest.digest('hex').slice(0, 12);
}
