// The run workflow's patches, and which path a run takes at each. Every `patched()` a run calls
// records a marker, and core upserts the TemporalChangeVersion search attribute with it: two
// events, and a visibility write of their own. Runs from before the generations recorded a marker
// for each patch; runs of the first generation record one, `patches-2026-12`, that stands for every
// patch here. A run of the second generation starts on a worker whose build ID says so
// (`subagents@2+…`, see `runPaths`) and records none: its history keeps that build ID, so replay
// decides as the run did.
import { patched, workflowInfo } from '@temporalio/workflow';

export const PATCHES = {
  /** A dispose before the segment settled ends it `error` (seam §5.5), not `aborted`. */
  disposeSettlesError: 'dispose-settles-error',
  /** A cancelled or disposed run cancels its nested runs at once, not once its turn stopped. */
  cascadeAtOnce: 'cancel-nested-runs-at-once',
  /** A provider that takes no messages is not nudged (a nudge is a message to the child). */
  nudgeNeedsSteering: 'nudge-needs-steering',
  /** `dispose` answers once the segment is told to stop; the caller waits for the close. */
  disposeAnswersAtOnce: 'dispose-answers-at-once',
  /** A settled segment records its outcome in history, where observers and the audit read it. */
  settleRecord: 'settle-record',
  /** Only a segment that parks records its settle point; one that closes the run has its result. */
  settleRecordOnlyParked: 'settle-record-only-parked',
  /** An agent-loop turn continues as new between two model calls when the server suggests it. */
  continueAsNewMidTurn: 'continue-as-new-mid-turn',
  /**
   * Activity inputs count the messages and tool results that are in history already instead of
   * carrying them again, so each is stored once.
   */
  storeOnce: 'store-once',
  /** An activity that fails after its run was cancelled (its worker died) stops the run. */
  cancelWins: 'cancel-wins-over-activity-failure',
  /** An activity that answers after its run was cancelled ends the turn `aborted`. */
  cancelWinsOverResult: 'cancel-wins-over-activity-result',
  /**
   * A small settle record is a memo change (a command, in the same workflow task) instead of a
   * local activity's marker (a second activation and a local activity before the task completes).
   */
  settleInMemo: 'settle-in-memo',
} as const;

export type Patch = (typeof PATCHES)[keyof typeof PATCHES];

/**
 * A nested run signals its parent when a segment settles (`childSettledSignal`). Added after the
 * first generation, so asked with `patched()` itself in its runs, and only by nested runs.
 */
export const CHILD_SETTLED_PATCH = 'child-settled-signal';

/**
 * A run that closes while its cancels to its nested runs are on their way waits until the server
 * has them: it drops a cancel whose sender has closed. Added after the second generation, so asked
 * with `patched()` itself, and only by runs that close with such cancels out.
 */
export const NESTED_CANCELS_DELIVERED_PATCH = 'nested-cancels-delivered';

/**
 * A run whose input names a workflow or task queue that its commands cannot carry (a raw client's:
 * ours refuses it at start) fails at once, and a `childStarted` signal naming such a run is
 * ignored. Before, core could not encode the command and shut the whole worker down, or the server
 * refused it at every workflow task. Asked with `patched()` itself, and only by such runs.
 */
export const UNNAMEABLE_IDS_PATCH = 'unnameable-ids-refused';

/**
 * A run whose input its code cannot run with (a raw client's: ours resolves and checks every field)
 * fails at once, `INVALID_REQUEST`: a part that is not an object, a prompt that is not content, a
 * setting that is not a number of its kind, carried state whose lists are not lists. Before, each
 * failed every workflow task of the run, or its turn on every attempt. Asked with `patched()`
 * itself, and only by such runs (workflows/run-input.ts).
 */
export const MALFORMED_INPUT_PATCH = 'malformed-input-refused';

/**
 * A `sendMessage` signal whose content is not content (a raw client's: ours checks it) is dropped,
 * counted in `droppedMessages`. Before, it became a turn's input, and the turn failed on every
 * attempt. Asked with `patched()` itself, and only by runs that get one.
 */
export const MALFORMED_MESSAGES_PATCH = 'malformed-messages-dropped';

/**
 * A `childStarted` signal naming a workflow whose id is not a run's (a raw client's: a workflow of
 * the user's own) is ignored. Before, cancelling or disposing of the run cancelled that workflow
 * with its nested runs. Asked with `patched()` itself, and only by runs that get one.
 */
export const FOREIGN_CHILDREN_PATCH = 'foreign-children-ignored';

/**
 * A run cancels its nested runs `NESTED_CANCEL_BATCH` at a time, each batch once the server has the
 * one before. Before, it cancelled them all in one workflow task, and one with more than the server
 * lets a run have out (`limit.numPendingCancelRequests.error`, 2,000 by default) failed at every
 * attempt: the run never closed, and its dispose never returned. Asked with `patched()` itself, and
 * only by runs with more nested runs to cancel than one batch.
 */
export const NESTED_CANCELS_IN_BATCHES_PATCH = 'nested-cancels-in-batches';

/** How many nested runs a run cancels at once: a twentieth of the limit a server has by default. */
export const NESTED_CANCEL_BATCH = 100;

/** Patch: every patch of `PATCHES` at once, with one marker (the first generation). */
const GENERATION_2026_12 = 'patches-2026-12';

/**
 * The workflow code's generation, as the bundle declares it: a worker whose bundle holds this
 * string stamps the generation into its build ID (`src/worker/worker.ts`). It is found in the
 * bundle, not assumed from the worker's package, so a bundle built from older code keeps a build
 * ID without it, and its runs record their markers.
 */
export const GENERATION_DECLARATION = 'subagent-run-workflow-generation:2';

/** The generation's number, and the build IDs that carry one: `subagents@<generation>+<hash>`. */
export const GENERATION = Number(GENERATION_DECLARATION.split(':')[1]);
const STAMPED_BUILD_ID = /^subagents@(\d+)\+/;

/** Which path a run takes at a patch. One per run, made by `runPaths()`. */
export type RunPaths = (patch: Patch | typeof CHILD_SETTLED_PATCH) => boolean;

/**
 * Which paths this run takes, decided by the worker that completed its first workflow task: its
 * build ID is in that task's completed event, and the SDK gives it as `currentBuildId` at the first
 * activation, run and replayed alike. A run begun by a worker of the second generation takes every
 * path here, without a marker. Any other run asks `patched()`: the first generation's marker (in a
 * run that started on it), or the patch's own (in a run from before, which took it). Call it at
 * the run's first activation, and only there: later workflow tasks may be other builds'.
 */
export function runPaths(): RunPaths {
  const stamp = STAMPED_BUILD_ID.exec(workflowInfo().currentBuildId ?? '');
  // The second generation, and any later one, takes every path listed here.
  if (stamp && Number(stamp[1]) >= 2) return () => true;
  return (patch) => (patch === CHILD_SETTLED_PATCH ? patched(patch) : patched(GENERATION_2026_12) || patched(patch));
}
