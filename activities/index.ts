// Every side effect of a run lives here. `createActivities` receives its dependencies (the hosted
// providers, a way to fetch a run's context from its workflow, the worker-side cache) and returns
// the activities a worker registers: a turn, a model call, and one activity per tool.
import { type ActivityDependencies, createActivityHost } from './host';
import { modelCallActivity } from './model-call';
import { toolActivities } from './tool-call';
import { turnActivity } from './turn';
import type { ModelCallInput, ModelCallResult, TurnActivityInput, TurnActivityResult } from './types';

export function createActivities(deps: ActivityDependencies) {
  const host = createActivityHost(deps);
  const activities: Record<string, (input: never) => Promise<unknown>> & {
    subagentTurn(input: TurnActivityInput): Promise<TurnActivityResult>;
    subagentModelCall(input: ModelCallInput): Promise<ModelCallResult>;
    subagentSegmentSettled<T>(outcome: T): Promise<T>;
  } = {
    ...toolActivities(host),
    subagentTurn: turnActivity(host),
    subagentModelCall: modelCallActivity(host),
    // Returns its input: run as a local activity, it writes the outcome into history once.
    subagentSegmentSettled: async (outcome) => outcome,
  };
  return activities;
}

export type SubagentActivities = ReturnType<typeof createActivities>;
export type { ActivityDependencies } from './host';
export { RunContextCache } from './run-context-cache';
export { MODEL_CALL_ACTIVITY, RESERVED_ACTIVITY_NAMES, SETTLED_ACTIVITY, TURN_ACTIVITY } from './types';
export type * from './types';
