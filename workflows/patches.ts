// The run workflow's patches, and which path a run takes at each. Every `patched()` a run calls
// records a marker, and core upserts the TemporalChangeVersion search attribute with it (two
// events, the attribute listing every patch so far), so a run that starts on this code records
// one marker that stands for all the patches here. Runs from before it record theirs one by one, as
// they did, and replay as they did. A patch added later is not in the generation: it uses
// `patched()` itself (or a new generation that lists it).
import { patched } from '@temporalio/workflow';

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
 * generation below, so asked with `patched()` itself, and only by nested runs.
 */
export const CHILD_SETTLED_PATCH = 'child-settled-signal';

/** Patch: every patch of `PATCHES` at once, with one marker. */
const GENERATION_2026_12 = 'patches-2026-12';

/**
 * Whether the run takes `patch`'s path: once the generation's marker is in its history (a run that
 * started on this code), or `patch`'s own (a run from before that took it). Deterministic as
 * `patched()` is: on replay each answers as the marker's place in history says.
 */
export function patchedPath(patch: Patch): boolean {
  return patched(GENERATION_2026_12) || patched(patch);
}
