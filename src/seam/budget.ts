// Budgets that flow down a delegation tree: what a run may still spend, what a nested run inherits,
// and whether the next turn or model call would go past a limit. Pure, so the workflow (which
// enforces them) and the facade (which resolves them) compute the same.
import type { ResolvedSubagentBudget } from './request';
import type { SubagentSpend, SubagentStopReason } from './result';
import type { SubagentRun } from './run';

/** Where a durable run handle keeps what its run spent (see `spendOf`); not part of the seam's shape. */
export const RUN_SPEND = Symbol.for('durable-subagents.run.spend');

/** What a durable run and the runs below it had spent when its result settled; undefined before, or for another kind of run. */
export function spendOf(run: SubagentRun): SubagentSpend | undefined {
  return (run as { [RUN_SPEND]?: SubagentSpend })[RUN_SPEND];
}

export function addSpend(a: SubagentSpend, b: SubagentSpend): SubagentSpend {
  return {
    turns: a.turns + b.turns,
    modelCalls: a.modelCalls + b.modelCalls,
    tokens: a.tokens + b.tokens,
    costUsd: a.costUsd + b.costUsd,
  };
}

/** The tighter of two budgets, limit by limit: a nested run's own budget can only narrow its parent's. */
export function narrowBudget(
  inherited: ResolvedSubagentBudget | undefined,
  own: ResolvedSubagentBudget | undefined,
): ResolvedSubagentBudget | undefined {
  if (!inherited) return own;
  if (!own) return inherited;
  const tighter = (a: number | undefined, b: number | undefined) =>
    a === undefined ? b : b === undefined ? a : Math.min(a, b);
  return omitUnset({
    maxTurns: tighter(inherited.maxTurns, own.maxTurns),
    maxModelCalls: tighter(inherited.maxModelCalls, own.maxModelCalls),
    maxTokens: tighter(inherited.maxTokens, own.maxTokens),
    maxCostUsd: tighter(inherited.maxCostUsd, own.maxCostUsd),
    deadline: tighter(inherited.deadline, own.deadline),
  });
}

/** What is left of `budget` once `spend` is spent: what a run delegating now hands its child. */
export function remainingBudget(budget: ResolvedSubagentBudget, spend: SubagentSpend): ResolvedSubagentBudget {
  const left = (limit: number | undefined, used: number) =>
    limit === undefined ? undefined : Math.max(limit - used, 0);
  return omitUnset({
    maxTurns: left(budget.maxTurns, spend.turns),
    maxModelCalls: left(budget.maxModelCalls, spend.modelCalls),
    maxTokens: left(budget.maxTokens, spend.tokens),
    maxCostUsd: left(budget.maxCostUsd, spend.costUsd),
    deadline: budget.deadline,
  });
}

export interface BudgetStop {
  stopReason: SubagentStopReason;
  diagnostic: string;
}

/**
 * Whether a run that has spent `spend` may begin its next turn or model call at `now` (epoch ms):
 * undefined if so, else how it ends: `aborted` past the deadline, `max-tokens` for a spent limit.
 */
export function budgetStop(
  budget: ResolvedSubagentBudget | undefined,
  spend: SubagentSpend,
  now: number,
  next: 'turn' | 'model-call',
): BudgetStop | undefined {
  if (!budget) return undefined;
  if (budget.deadline !== undefined && now >= budget.deadline) {
    return {
      stopReason: 'aborted',
      diagnostic: `budget: the deadline ${new Date(budget.deadline).toISOString()} has passed`,
    };
  }
  const spent = (limit: number | undefined, used: number, name: string) =>
    limit !== undefined && used >= limit ? `budget: ${name} ${limit} is spent (${round(used)} used)` : undefined;
  const diagnostic =
    (next === 'turn' ? spent(budget.maxTurns, spend.turns, 'maxTurns') : undefined) ??
    (next === 'model-call' ? spent(budget.maxModelCalls, spend.modelCalls, 'maxModelCalls') : undefined) ??
    spent(budget.maxTokens, spend.tokens, 'maxTokens') ??
    spent(budget.maxCostUsd, spend.costUsd, 'maxCostUsd');
  return diagnostic === undefined ? undefined : { stopReason: 'max-tokens', diagnostic };
}

function round(value: number): number {
  return Math.round(value * 1e6) / 1e6;
}

function omitUnset(budget: ResolvedSubagentBudget): ResolvedSubagentBudget {
  return Object.fromEntries(Object.entries(budget).filter(([, value]) => value !== undefined));
}
