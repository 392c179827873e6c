// Figures and verdicts for the benchmark: percentiles of samples, and ratios measured round by
// round, reported with their spread so that one noisy round cannot decide a verdict.

export interface Percentiles {
  p50: number;
  p90: number;
  p95: number;
  p99: number;
}

export function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p90: at(0.9), p95: at(0.95), p99: at(0.99) };
}

/** A goal a figure is held to: at most or at least `value`. */
export interface Goal {
  readonly atMost?: number;
  readonly atLeast?: number;
}

const meets = (goal: Goal, value: number) =>
  (goal.atMost === undefined || value <= goal.atMost) && (goal.atLeast === undefined || value >= goal.atLeast);

/**
 * A ratio measured once per round: its median is the figure and decides the verdict; min and max
 * are the spread, and `every_round` says whether the goal held in each round as well.
 */
export interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number[];
  goal?: string;
  met?: boolean;
  every_round?: boolean;
}

export function spread(rounds: number[], goal?: Goal, digits = 3): Spread {
  const round = (value: number) => Number(value.toFixed(digits));
  const median = percentiles(rounds).p50;
  const figure: Spread = {
    median: round(median),
    min: round(Math.min(...rounds)),
    max: round(Math.max(...rounds)),
    rounds: rounds.map(round),
  };
  if (!goal) return figure;
  return {
    ...figure,
    goal: goal.atMost !== undefined ? `<= ${goal.atMost}` : `>= ${goal.atLeast}`,
    met: meets(goal, median),
    every_round: rounds.every((value) => meets(goal, value)),
  };
}

/** `0.912 (0.874-0.951, 5 rounds) goal >= 0.9: met, not in every round` */
export function describeSpread(figure: Spread): string {
  const range = `${figure.median.toFixed(3)} (${figure.min.toFixed(3)}-${figure.max.toFixed(3)}, ${figure.rounds.length} rounds)`;
  if (figure.goal === undefined) return range;
  const verdict = figure.met ? (figure.every_round ? 'met in every round' : 'met, not in every round') : 'NOT met';
  return `${range}   goal ${figure.goal}: ${verdict}`;
}

export const round = (value: number, digits = 1) => Number(value.toFixed(digits));
