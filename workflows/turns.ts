// How a run's turns execute. The `turns` driver runs one provider turn as one activity. The
// `agent-loop` driver runs each model call and each tool call as an activity of its own, and
// hands steering messages to the child before every model call. Both keep the conversation in
// the workflow and send activities a reference to it plus what is new, never the whole of it.
import {
  ActivityOptions,
  CancellationScope,
  CancelledFailure,
  isCancellation,
  proxyActivities,
  proxySinks,
} from '@temporalio/workflow';
import type { createActivities } from '../activities';
import type { ModelCallResult, ModelToolCall, ToolActivityInput, ToolActivityResult } from '../activities/types';
import type { Approvals } from './approvals';
import type { SubagentSinks } from './definitions';
import { PATCHES, type RunPaths } from './patches';
import type { ContentBlock, JsonValue } from '../src/seam/content';
import { addSpend, budgetStop } from '../src/seam/budget';
import { delegationOf } from '../src/seam/delegation';
import { causeChain } from '../src/seam/errors';
import type { ResolvedSubagentRequest, TranscriptEntry } from '../src/seam/request';
import type { SubagentSpend, SubagentTurnResult, SubagentUsage } from '../src/seam/result';
import { toolError } from '../src/seam/tool';

/** The run's mutable state that turns read and extend; carried through continue-as-new. */
export interface RunState {
  readonly runId: string;
  readonly provider: string;
  readonly segment: number;
  readonly request: ResolvedSubagentRequest;
  readonly transcript: TranscriptEntry[];
  /** User messages waiting for the child, in arrival order. */
  readonly pending: ContentBlock[][];
  /** Turns begun over the child's life. */
  turn: number;
  usage: SubagentUsage;
  /** Model calls answered over the child's life, and their cost (USD, as the workers price them). */
  modelCalls: number;
  costUsd: number;
  /** What each run this run delegated to reported it and its descendants spent, by run id. */
  childSpend: Record<string, SubagentSpend>;
  /** What the provider's last turn left for its next (turn-based providers). */
  providerState?: JsonValue;
}

/** What the run itself has spent, without the runs below it. */
export function ownSpend(state: RunState): SubagentSpend {
  return {
    turns: state.turn,
    modelCalls: state.modelCalls,
    tokens: state.usage.promptTokens + state.usage.completionTokens,
    costUsd: state.costUsd,
  };
}

/** What the run and every run below it have spent: the measures its budget limits. */
export function treeSpend(state: RunState): SubagentSpend {
  return Object.values(state.childSpend).reduce(addSpend, ownSpend(state));
}

/** Where an agent-loop turn stood when its run continued as new between two model calls. */
export interface MidTurn {
  /** The turn's number. */
  turn: number;
  /** The model call to make next. */
  step: number;
  /** Where the conversation the next model call is sent as new begins (`delta`). */
  base: number;
}

export interface TurnOptions {
  /** Carry on a turn the run's previous Temporal run began (agent loop only). */
  resumeAt?: MidTurn;
  /** Called between two model calls of an agent-loop turn, before the next; may continue as new. */
  betweenSteps?: (at: MidTurn) => Promise<void>;
}

export type TurnRunner = (turnInput: ContentBlock[][], options?: TurnOptions) => Promise<SubagentTurnResult>;

type Activities = ReturnType<typeof createActivities>;
type ToolActivities = Record<string, (input: ToolActivityInput) => Promise<ToolActivityResult>>;

export function turnRunner(
  driver: 'turns' | 'agent-loop',
  state: RunState,
  options: ActivityOptions,
  maxStepsPerTurn: number,
  approvals: Approvals,
  takes: RunPaths,
  /** Where model calls go when their endpoint is rate-limited fleet-wide (else the run's queue). */
  modelTaskQueue?: string,
): TurnRunner {
  const activities = proxyActivities<Activities>(options);
  const modelCalls = modelTaskQueue
    ? proxyActivities<Activities>({ ...options, taskQueue: modelTaskQueue })
    : activities;
  const tools = proxyActivities<ToolActivities>(options);
  const { subagentConversation } = proxySinks<SubagentSinks>();
  /** Appends user messages to the conversation, and tells this worker's activities where they stand. */
  const appendUser = (messages: ContentBlock[][]) => {
    if (messages.length === 0) return;
    const entries = messages.map((content): TranscriptEntry => ({ kind: 'user', content }));
    subagentConversation.userEntries(state.transcript.length, entries);
    state.transcript.push(...entries);
  };

  /** Where the conversation stands before `length` entries: its length and its last assistant entry. */
  const reference = (length: number) => ({
    length,
    lastAssistantId: state.transcript.slice(0, length).findLast((entry) => entry.kind === 'assistant')?.id,
  });

  /** How the run ends instead of its next turn or model call, when its budget is spent. */
  const overBudget = (next: 'turn' | 'model-call'): SubagentTurnResult | undefined => {
    const stop = budgetStop(state.request.budget, treeSpend(state), Date.now(), next);
    return stop && { output: [], ...stop };
  };

  async function providerTurn(turnInput: ContentBlock[][]): Promise<SubagentTurnResult> {
    const stop = overBudget('turn');
    if (stop) return stop;
    const transcriptRef = reference(state.transcript.length);
    const turn = state.turn++;
    appendUser(turnInput);
    approvals.beginTurn(turn);
    try {
      const result = await activities.subagentTurn({
        provider: state.provider,
        segment: state.segment,
        turn,
        // The messages are in history already (the start, signals, the resume): count them only.
        ...(takes(PATCHES.storeOnce) ? { inputLength: turnInput.length } : { input: turnInput }),
        transcript: transcriptRef,
        request: turn === 0 ? state.request : undefined,
        ...(state.providerState === undefined ? {} : { providerState: state.providerState }),
        // What the turn's nested runs inherit is what remains then.
        ...(state.request.budget ? { spent: treeSpend(state) } : {}),
      });
      if (cancelledMeanwhile(result.stopReason, takes)) result.stopReason = 'aborted';
      // Messages the provider took mid-turn came after the turn's input, before its answer.
      appendUser(state.pending.splice(0, result.consumedMessages));
      state.transcript.push({
        kind: 'assistant',
        id: result.outputId,
        content: result.output,
        stopReason: result.stopReason,
      });
      if (result.providerState !== undefined) state.providerState = result.providerState;
      if (result.nestedSpend) Object.assign(state.childSpend, result.nestedSpend);
      const { outputId: _, consumedMessages: __, nestedSpend: ___, ...turnResult } = result;
      return turnResult;
    } catch (err) {
      if (stoppedByCancel(err, takes)) throw err;
      return { output: [], stopReason: 'error', diagnostic: failureMessage(err) };
    } finally {
      approvals.endTurn(turn);
    }
  }

  async function agentLoopTurn(
    turnInput: ContentBlock[][],
    { resumeAt, betweenSteps }: TurnOptions = {},
  ): Promise<SubagentTurnResult> {
    if (!resumeAt) {
      const stop = overBudget('turn');
      if (stop) return stop;
    }
    const turn = resumeAt?.turn ?? state.turn++;
    let base = resumeAt?.base ?? state.transcript.length;
    // A carried-on turn goes on as it would have: messages that came meanwhile join before the next call.
    appendUser(resumeAt ? state.pending.splice(0) : turnInput);
    const firstStep = resumeAt?.step ?? 0;
    // The ids of the tool results that begin the next call's delta (store-once).
    let toolResultIds: string[] | undefined;
    for (let step = firstStep; ; step++) {
      if (step > firstStep) await betweenSteps?.({ turn, step, base });
      if (step === maxStepsPerTurn) {
        return {
          output: [],
          stopReason: 'error',
          diagnostic: `the child made ${step} model calls in one turn (maxStepsPerTurn)`,
        };
      }
      const stop = overBudget('model-call');
      if (stop) return stop;
      let result: ModelCallResult;
      try {
        result = await modelCalls.subagentModelCall({
          provider: state.provider,
          segment: state.segment,
          turn,
          transcript: reference(base),
          // Tool results and messages are in history already (the tools' results, signals): the
          // call counts them, and names the results its worker may hold.
          ...(takes(PATCHES.storeOnce)
            ? { deltaLength: state.transcript.length - base, ...(toolResultIds ? { toolResultIds } : {}) }
            : { delta: state.transcript.slice(base) }),
          request: turn === 0 && step === 0 ? state.request : undefined,
          callsInContent: true,
          asksApproval: true,
        });
      } catch (err) {
        if (stoppedByCancel(err, takes)) {
          // A call cancelled mid-stream reports what it had used by then: it is charged too.
          const partial = partialUsageOf(err);
          if (partial) charge(partial, partial.costUsd);
          throw err;
        }
        return { output: [], stopReason: 'error', diagnostic: failureMessage(err) };
      }
      if (cancelledMeanwhile(result.stopReason, takes)) result.stopReason = 'aborted';
      state.transcript.push({
        kind: 'assistant',
        id: result.outputId,
        content: result.content,
        stopReason: result.stopReason,
      });
      state.modelCalls++;
      if (result.usage) charge(result.usage, result.costUsd);
      const toolCalls = toolCallsOf(result);
      if (result.stopReason !== 'completed' || toolCalls.length === 0) return turnResult(result);

      // Calls run concurrently; their results enter the conversation in call order. A call the
      // provider's policy holds for approval runs once approved; a denied one tells the model why.
      const held = new Set(result.approvals ?? []);
      const answers: ToolActivityResult[] = await Promise.all(
        toolCalls.map(
          (call, index) =>
            call.answer ??
            (held.has(call.id) ? approvedThenRun(call, `t${turn}.s${step}.c${index}`, turn) : runTool(call)),
        ),
      );
      toolResultIds = answers.every((answer) => answer.resultId !== undefined)
        ? answers.map((answer) => answer.resultId!)
        : undefined;
      base = state.transcript.length;
      state.transcript.push({
        kind: 'tool',
        results: toolCalls.map((call, index) => ({
          type: 'tool-result',
          toolCallId: call.id,
          content: answers[index]!.content,
          isError: answers[index]!.isError,
        })),
      });
      // A capture ends the turn: no further model call.
      if (result.structured !== undefined) return turnResult(result);
      appendUser(state.pending.splice(0));
    }
  }

  async function approvedThenRun(call: ModelToolCall, local: string, turn: number): Promise<ToolActivityResult> {
    const { decision, by, reason } = await approvals.ask(local, turn, { tool: call.name, arguments: call.arguments });
    if (decision === 'allow') return runTool(call);
    const why = by === 'timeout' ? 'nobody approved it in time' : (reason ?? 'it was denied');
    return toolError(`the call to ${call.name} was not approved: ${why}`);
  }

  /** Adds one model call's tokens, and their cost, to the run's. */
  function charge(usage: SubagentUsage, costUsd = 0): void {
    state.usage = {
      promptTokens: state.usage.promptTokens + usage.promptTokens,
      completionTokens: state.usage.completionTokens + usage.completionTokens,
    };
    state.costUsd += costUsd;
  }

  /** A tool activity; a failure after its retries becomes an error result the model can read. */
  async function runTool(call: ModelToolCall): Promise<ToolActivityResult> {
    try {
      const result = await tools[call.name]!({
        provider: state.provider,
        callId: call.id,
        arguments: call.arguments,
        ...(state.request.parent.cwd === undefined ? {} : { cwd: state.request.parent.cwd }),
        delegation: delegationOf(state.request, treeSpend(state)),
        ...(state.request.toolFilter ? { toolFilter: state.request.toolFilter } : {}),
      });
      // What the runs the call delegated to spent, as each last settled, is charged to this run.
      if (result.nestedSpend) Object.assign(state.childSpend, result.nestedSpend);
      return result;
    } catch (err) {
      if (stoppedByCancel(err, takes)) throw err;
      return toolError(`tool ${call.name} failed: ${failureMessage(err)}`);
    }
  }

  return driver === 'agent-loop' ? agentLoopTurn : providerTurn;
}

/** A model call's tool calls in order, each with the answer the activity gave it, if any. */
function toolCallsOf(result: ModelCallResult): ModelToolCall[] {
  if (result.toolCalls) return result.toolCalls;
  return result.content.flatMap((block) => {
    if (block.type !== 'tool-call') return [];
    const answer = result.answers?.[block.id];
    return [{ id: block.id, name: block.name, arguments: block.arguments, ...(answer ? { answer } : {}) }];
  });
}

function turnResult(result: ModelCallResult): SubagentTurnResult {
  return {
    output: result.content,
    stopReason: result.stopReason,
    ...(result.diagnostic === undefined ? {} : { diagnostic: result.diagnostic }),
    ...(result.structured === undefined ? {} : { structured: result.structured }),
  };
}

/**
 * Whether a failed activity means the run was stopped: its cancellation, or any failure once the
 * run is cancelled. A cancelled activity whose worker died never reports its cancellation; it
 * ends by its heartbeat timeout (histories from before the patch: a failure like any other).
 */
function stoppedByCancel(err: unknown, takes: RunPaths): boolean {
  return isCancellation(err) || (CancellationScope.current().consideredCancelled && takes(PATCHES.cancelWins));
}

/**
 * Whether an activity's answer came after its run was cancelled: the cancel reaches an activity
 * with its next heartbeat, and a turn that finished meanwhile (a delegating turn whose nested run
 * the cancel stopped at once) would otherwise settle as if no cancel had come.
 */
function cancelledMeanwhile(stopReason: string, takes: RunPaths): boolean {
  return (
    stopReason !== 'aborted' && CancellationScope.current().consideredCancelled && takes(PATCHES.cancelWinsOverResult)
  );
}

/** The usage a model call cancelled mid-stream reported with its cancellation, if any. */
function partialUsageOf(err: unknown): (SubagentUsage & { costUsd?: number }) | undefined {
  const cancelled = causeChain(err).find((e): e is CancelledFailure => e instanceof CancelledFailure);
  const [details] = (cancelled?.details ?? []) as [{ partialUsage?: SubagentUsage & { costUsd?: number } }?];
  return details?.partialUsage;
}

/** The messages of a failure chain: ActivityFailure wraps the provider's failure or a timeout. */
function failureMessage(err: unknown): string {
  return (
    causeChain(err)
      .map((e) => e.message)
      .filter(Boolean)
      .join(': ') || 'the turn failed'
  );
}
