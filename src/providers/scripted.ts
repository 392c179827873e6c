// `scripted`: a deterministic TEST DOUBLE standing in for a real child agent. Each turn follows a
// script entry (reply, tool calls, stop reason, delay, failure); it takes steering, resume and
// structured output, so every part of the durable mapping can be exercised without a model.
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import { type ContentBlock, textOf } from '../seam/content';
import type {
  SubagentCapabilities,
  SubagentRunSettings,
  SubagentTurnContext,
  SubagentTurnProvider,
} from '../seam/provider';
import type { SubagentStopReason, SubagentTurnResult } from '../seam/result';
import { STRUCTURED_OUTPUT_TOOL } from '../seam/structured';
import { type ToolCallOutcome, toolError, toolResult } from '../seam/tool';

/** One scripted turn; a run's turn N (counted over all its segments) plays entry N. */
export interface ScriptedTurn {
  /**
   * The reply text. Placeholders: `{input}` this turn's user messages joined by " | ",
   * `{conversation}` every earlier user message joined by " | ", `{turn}`, `{segment}`, `{attempt}`,
   * `{child}` (see `delegate`), `{approval}` (see `askApproval`).
   */
  reply?: string;
  /**
   * Ask the run to approve this tool call (`context.requestApproval`) before answering; `{approval}`
   * in the reply becomes `allow`, or `deny (<by>)`.
   */
  askApproval?: { tool: string; arguments?: unknown; kind?: string };
  /** Exact output blocks, instead of `reply`. */
  output?: ContentBlock[];
  /**
   * Tool calls the turn makes, in order, as one model response would: `structured_output` goes
   * through the run's capture runtime; after a capture every later call is denied. `arguments`
   * is a JSON value, or a string sent as is (to play malformed JSON).
   */
  calls?: { name: string; arguments?: unknown }[];
  stopReason?: SubagentStopReason;
  diagnostic?: string;
  /** Wait this long before answering (heartbeating; cancellable). */
  delayMs?: number;
  /** Wait until cancelled. */
  hang?: boolean;
  /** On the first attempt only, wait this long (a turn whose worker dies while it works). */
  stallFirstAttemptMs?: number;
  /**
   * Delegate to a provider through `context.delegate` before answering (awaited, then
   * disposed); `{child}` in the reply becomes the child's answer, `child <stopReason>`, or
   * `refused: <code>` when the start threw.
   */
  delegate?: { provider: string; prompt: string; script?: ScriptedTurn[]; maxDepth?: number };
  /** Wait this long after the tool calls, before answering (heartbeating; cancellable). */
  holdMs?: number;
  /** On the first attempt only, wait after the tool calls until cancelled (a worker killed after them). */
  holdFirstAttempt?: boolean;
  /**
   * After the tool calls, wait until this file exists: a gate that a test in another process
   * opens once what the turn must see is in place. `{run}` and `{turn}` are filled in.
   */
  waitFor?: string;
  /** Fail the turn for good with this message: the segment settles `error`. */
  fail?: string;
  /** Fail retryably while the attempt number is at most this (a transient fault). */
  failAttempts?: number;
}

/** What a scripted run reads from `request.agentOptions`. */
export interface ScriptedAgentOptions {
  script?: ScriptedTurn[];
}

export interface ScriptedTurnEvent {
  kind: 'turn-start' | 'turn-end' | 'cancelled' | 'tool-result';
  runId: string;
  segment: number;
  turn: number;
  attempt: number;
  /** The text of each user message this turn answers. */
  input: string[];
  /** For `tool-result`: the tool and what the call returned. */
  tool?: { name: string; isError: boolean; result: string };
  /** For `turn-start` of a structured run: the `structured_output` parameters the child was shown. */
  structuredSchema?: unknown;
}

export interface ScriptedProviderOptions {
  name?: string;
  capabilities?: Partial<SubagentCapabilities>;
  inheritsParentContext?: boolean;
  steering?: boolean;
  resumable?: boolean;
  taskQueue?: string;
  runSettings?: SubagentRunSettings;
  /** Played when the request carries no script. */
  script?: ScriptedTurn[];
  /** Sees every turn start, tool result, end and cancellation; the turn waits for a returned promise. */
  observer?: (event: ScriptedTurnEvent) => unknown;
}

export const DEFAULT_SCRIPTED_REPLY = 'scripted reply to: {input}';

export function createScriptedProvider(options: ScriptedProviderOptions = {}): SubagentTurnProvider {
  const observe = options.observer ?? (() => {});
  return {
    name: options.name ?? 'scripted',
    capabilities: { outputSchema: true, depthLimit: true, toolFilter: true, ...options.capabilities },
    inheritsParentContext: options.inheritsParentContext ?? false,
    steering: options.steering ?? true,
    resumable: options.resumable ?? true,
    ...(options.taskQueue === undefined ? {} : { taskQueue: options.taskQueue }),
    ...(options.runSettings === undefined ? {} : { runSettings: options.runSettings }),

    async runTurn(input: ContentBlock[][], ctx: SubagentTurnContext): Promise<SubagentTurnResult> {
      const agentOptions = ctx.request.agentOptions as ScriptedAgentOptions | undefined;
      const script = agentOptions?.script ?? options.script ?? [];
      const step: ScriptedTurn = script[ctx.turn] ?? {};
      const texts = input.map(textOf);
      const event = { runId: ctx.runId, segment: ctx.segment, turn: ctx.turn, attempt: ctx.attempt, input: texts };
      const schema = ctx.structuredOutput?.tool.parameters;
      await observe({ kind: 'turn-start', ...event, ...(schema ? { structuredSchema: schema } : {}) });
      const wait = async (ms: number) => {
        try {
          await sleep(ms, undefined, { signal: ctx.signal });
        } catch (err) {
          if (ctx.signal.aborted) await observe({ kind: 'cancelled', ...event });
          throw err;
        }
      };
      if (step.delayMs) await wait(step.delayMs);
      if (step.stallFirstAttemptMs && ctx.attempt === 1) await wait(step.stallFirstAttemptMs);
      const child = step.delegate ? await delegate(step.delegate, ctx) : '';
      const approval = step.askApproval ? await askApproval(step.askApproval, ctx) : '';
      if (step.hang) await wait(2 ** 31 - 1);
      if (step.failAttempts !== undefined && ctx.attempt <= step.failAttempts) {
        throw ApplicationFailure.retryable(
          `scripted transient failure on attempt ${ctx.attempt}`,
          'SCRIPTED_TRANSIENT',
        );
      }
      if (step.fail !== undefined) throw ApplicationFailure.nonRetryable(step.fail, 'SCRIPTED_FAILURE');

      const needsConversation = step.reply?.includes('{conversation}') ?? false;
      const earlier = needsConversation
        ? (await ctx.transcript()).filter((entry) => entry.kind === 'user').map((entry) => textOf(entry.content))
        : [];
      const fill = (template: string) =>
        template
          .replaceAll('{input}', texts.join(' | '))
          .replaceAll('{conversation}', earlier.join(' | '))
          .replaceAll('{turn}', String(ctx.turn))
          .replaceAll('{segment}', String(ctx.segment))
          .replaceAll('{attempt}', String(ctx.attempt))
          .replaceAll('{child}', child)
          .replaceAll('{approval}', approval);
      const toolCalls: ContentBlock[] = [];
      for (const [index, call] of (step.calls ?? []).entries()) {
        const argumentsJson =
          typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {});
        toolCalls.push({
          type: 'tool-call',
          id: `call-${ctx.turn}-${index}`,
          name: call.name,
          arguments: argumentsJson,
        });
        const outcome = callTool(call.name, argumentsJson, ctx);
        await observe({
          kind: 'tool-result',
          ...event,
          tool: { name: call.name, isError: outcome.isError, result: textOf(outcome.content) },
        });
      }
      if (step.holdMs) await wait(step.holdMs);
      if (step.holdFirstAttempt && ctx.attempt === 1) await wait(2 ** 31 - 1);
      if (step.waitFor) {
        const path = fillPath(step.waitFor, ctx);
        while (!existsSync(path)) await wait(25);
      }
      const replyText = step.reply ?? (toolCalls.length > 0 ? undefined : DEFAULT_SCRIPTED_REPLY);
      const output = step.output ?? [
        ...(replyText === undefined ? [] : [{ type: 'text' as const, text: fill(replyText) }]),
        ...toolCalls,
      ];
      await observe({ kind: 'turn-end', ...event });
      return {
        output,
        stopReason: step.stopReason ?? 'completed',
        ...(step.diagnostic === undefined ? {} : { diagnostic: step.diagnostic }),
      };
    },
  };
}

/** `{run}` and `{turn}` of a gate path filled in. */
function fillPath(template: string, ctx: SubagentTurnContext): string {
  return template.replaceAll('{run}', ctx.runId).replaceAll('{turn}', String(ctx.turn));
}

async function askApproval(ask: NonNullable<ScriptedTurn['askApproval']>, ctx: SubagentTurnContext): Promise<string> {
  if (!ctx.requestApproval) return 'deny (this worker cannot ask)';
  const { decision, by } = await ctx.requestApproval({
    tool: ask.tool,
    arguments: typeof ask.arguments === 'string' ? ask.arguments : JSON.stringify(ask.arguments ?? {}),
    ...(ask.kind === undefined ? {} : { kind: ask.kind }),
  });
  return decision === 'allow' ? 'allow' : `deny (${by})`;
}

/** Runs a nested delegation to its end and says how it went. */
async function delegate(step: NonNullable<ScriptedTurn['delegate']>, ctx: SubagentTurnContext): Promise<string> {
  if (!ctx.delegate) return 'refused: this worker offers no delegation';
  let run;
  try {
    run = ctx.delegate(step.provider, {
      prompt: [{ type: 'text', text: step.prompt }],
      ...(step.script ? { agentOptions: { script: step.script } } : {}),
      ...(step.maxDepth === undefined ? {} : { maxDepth: step.maxDepth }),
    });
  } catch (err) {
    return `refused: ${(err as { code?: string }).code ?? (err as Error).message}`;
  }
  try {
    const result = await run.result;
    return result.stopReason === 'completed' ? textOf(result.output) : `child ${result.stopReason}`;
  } finally {
    await run.dispose();
  }
}

/** A scripted tool call: the capture runtime for `structured_output`, a stand-in for any other tool. */
function callTool(name: string, argumentsJson: string, ctx: SubagentTurnContext): ToolCallOutcome {
  const runtime = ctx.structuredOutput;
  if (runtime?.captured) return runtime.deny(name);
  if (name !== STRUCTURED_OUTPUT_TOOL) return toolResult(`${name} ran`);
  if (runtime) return runtime.call(argumentsJson);
  return toolError('structured_output is only available to subagents started with an output schema');
}
