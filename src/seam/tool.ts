// Tools an agent-loop child can call, and what a tool call returns to the model. Every tool
// result in the project is built here: a text the model reads, marked as a failure or not. And
// the mark of the built-in file tools, which the model call's system prompt names.
import { type ContentBlock, textContent, textOf } from './content';
import type { SubagentNestedStartRequest, SubagentSessionEvent } from './request';
import type { SubagentSpend } from './result';
import type { SubagentRun } from './run';

/** What a tool call returns to the model. */
export interface ToolCallOutcome {
  content: ContentBlock[];
  isError: boolean;
  /**
   * What the runs the call delegated to spent, each with the runs below it, by run id: charged to
   * the calling run. Whole turns, model calls and tokens and a cost, none negative; a result with
   * anything else here reaches the model as an error.
   */
  nestedSpend?: Record<string, SubagentSpend>;
}

/** A result of one text block; `isError` marks it as a failure for the model. */
export function toolResult(text: string, isError = false): ToolCallOutcome {
  return { isError, content: textContent(text) };
}

/** A failure the model reads as `Error: <message>`. */
export function toolError(message: string): ToolCallOutcome {
  return toolResult(`Error: ${message}`, true);
}

/** The text of a tool result, its text blocks joined. */
export function toolResultText(outcome: ToolCallOutcome): string {
  return textOf(outcome.content);
}

export interface SubagentToolContext {
  /** The run's working directory; tools refuse paths outside it. Undefined when the parent had none. */
  cwd: string | undefined;
  /** Aborts when the run is cancelled. */
  signal: AbortSignal;
  runId: string;
  /** The model's id for this call. Not unique: some endpoints number calls per response. */
  callId: string;
  /** This call's own key: unique over the run's whole life, the same for every retry of the call. */
  callKey: string;
  /**
   * Present when the worker offers its service: a nested run with this run as its parent (see
   * `SubagentTurnContext.delegate`). With `parentEvents` (from `completedTurns`), a provider that
   * inherits its parent's context (fork) is seeded with them; without, it starts unseeded.
   */
  delegate?(
    provider: string,
    request: SubagentNestedStartRequest,
    parentEvents?: readonly SubagentSessionEvent[],
  ): SubagentRun;
  /**
   * Present with `delegate`: the run's completed turns, its conversation before the turn this call
   * is part of (its own seed included), as a session log ending with a `turn/end`; [] when no turn
   * has completed. Read from the run's workflow (a query) at each call. Rejects when the workflow
   * cannot be asked; a tool that passes the rejection on fails its attempt, which is retried.
   */
  completedTurns?(): Promise<SubagentSessionEvent[]>;
}

/**
 * A tool an agent-loop child can call. Each call runs as an activity named after it, or, for an
 * `inline` tool, inside the model call that asked for it.
 */
export interface SubagentTool {
  /** snake_case; the activity type name in Temporal history. */
  readonly name: string;
  /** Shown to the model. */
  readonly description: string;
  /** JSON Schema (an object schema) of the arguments, shown to the model. */
  readonly parameters: Record<string, unknown>;
  /**
   * Whether a call must be approved before it runs (`SubagentRun.approve`, `subagents approve`):
   * the run parks the call durably, its status says `awaiting-approval`, and a denial (or no
   * answer within `runSettings.approvalTimeout`) reaches the model as an error result. A function
   * decides per call from the parsed arguments; one that throws, or that has not decided within
   * 10 seconds, holds the call. Default: never.
   */
  readonly needsApproval?: boolean | ((args: unknown) => boolean | Promise<boolean>);
  /**
   * Run each call inside the model call that asked for it, not as an activity of its own: its
   * result reaches the workflow with the model's answer, which saves a round trip to the server
   * and a workflow task per step. For a quick tool with no side effects only: a retried model call
   * runs it again, and a rejection becomes an error result the model reads instead of a retry. An
   * inline call gets no `delegate`. Default false; the built-in file tools are inline.
   */
  readonly inline?: boolean;
  /**
   * Runs the tool with the model's parsed arguments. Resolves with what the model sees; bad
   * arguments and refused paths resolve with `isError` and never throw. A rejection means an
   * infrastructure fault (retryable) or the run's cancellation (the signal's reason). A resolved
   * value that is not a `ToolCallOutcome`, or that cannot be sent as one payload, reaches the model
   * as an error result; the call is not retried.
   */
  execute(args: unknown, context: SubagentToolContext): Promise<ToolCallOutcome>;
}

/** Marks a built-in file tool: every path it takes is confined to the run's working directory. */
const CONFINED_FILE_TOOL = Symbol('subagent.confinedFileTool');

/** `tool`, marked as a built-in file tool; a copy made of it (`{ ...tool, inline: false }`) keeps the mark. */
export function confinedFileTool(tool: SubagentTool): SubagentTool {
  return Object.assign(tool, { [CONFINED_FILE_TOOL]: true });
}

/** Whether `tool` is a built-in file tool (or a copy of one), not another tool of the same name. */
export function isConfinedFileTool(tool: SubagentTool): boolean {
  return (tool as { [CONFINED_FILE_TOOL]?: boolean })[CONFINED_FILE_TOOL] === true;
}
