// `scripted`: a deterministic TEST DOUBLE standing in for a real child agent. Each turn follows a
// script entry (reply, stop reason, delay, failure); it takes steering and resume, so every part
// of the durable mapping can be exercised without a model.
import { setTimeout as sleep } from 'node:timers/promises';
import { ApplicationFailure } from '@temporalio/common';
import type { ContentBlock, SubagentStopReason, SubagentTurnResult } from '../../activities/contracts';
import type { SubagentCapabilities, SubagentRunSettings, SubagentTurnContext, SubagentTurnProvider } from '../../activities/provider';

/** One scripted turn; a run's turn N (counted over all its segments) plays entry N. */
export interface ScriptedTurn {
  /**
   * The reply text. Placeholders: `{input}` this turn's user messages joined by " | ",
   * `{conversation}` every earlier user message joined by " | ", `{turn}`, `{segment}`, `{attempt}`.
   */
  reply?: string;
  /** Exact output blocks, instead of `reply`. */
  output?: ContentBlock[];
  stopReason?: SubagentStopReason;
  diagnostic?: string;
  /** Wait this long before answering (heartbeating; cancellable). */
  delayMs?: number;
  /** Wait until cancelled. */
  hang?: boolean;
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
  kind: 'turn-start' | 'turn-end' | 'cancelled';
  runId: string;
  segment: number;
  turn: number;
  attempt: number;
  /** The text of each user message this turn answers. */
  input: string[];
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
  /** Sees every turn start, end and cancellation (tests assert on it). */
  observer?: (event: ScriptedTurnEvent) => void;
}

export const DEFAULT_SCRIPTED_REPLY = 'scripted reply to: {input}';

export function createScriptedProvider(options: ScriptedProviderOptions = {}): SubagentTurnProvider {
  const observe = options.observer ?? (() => {});
  return {
    name: options.name ?? 'scripted',
    capabilities: { outputSchema: false, depthLimit: true, toolFilter: true, ...options.capabilities },
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
      observe({ kind: 'turn-start', ...event });
      try {
        if (step.delayMs) await sleep(step.delayMs, undefined, { signal: ctx.signal });
        if (step.hang) await sleep(2 ** 31 - 1, undefined, { signal: ctx.signal });
      } catch (err) {
        if (ctx.signal.aborted) observe({ kind: 'cancelled', ...event });
        throw err;
      }
      if (step.failAttempts !== undefined && ctx.attempt <= step.failAttempts) {
        throw ApplicationFailure.retryable(`scripted transient failure on attempt ${ctx.attempt}`, 'SCRIPTED_TRANSIENT');
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
          .replaceAll('{attempt}', String(ctx.attempt));
      const output = step.output ?? [{ type: 'text', text: fill(step.reply ?? DEFAULT_SCRIPTED_REPLY) }];
      observe({ kind: 'turn-end', ...event });
      return {
        output,
        stopReason: step.stopReason ?? 'completed',
        ...(step.diagnostic === undefined ? {} : { diagnostic: step.diagnostic }),
      };
    },
  };
}

function textOf(content: ContentBlock[]): string {
  return content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}
