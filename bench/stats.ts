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
 * are its spread, and `rounds_met` counts the rounds in which the goal held on its own.
 */
export interface Spread {
  median: number;
  min: number;
  max: number;
  rounds: number[];
  goal?: string;
  verdict?: 'met' | 'not met';
  rounds_met?: number;
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
    verdict: meets(goal, median) ? 'met' : 'not met',
    rounds_met: rounds.filter((value) => meets(goal, value)).length,
  };
}

/** `0.912 (0.874-0.951, 5 rounds)   goal >= 0.9: met (in 3 of 5 rounds)` */
export function describeSpread(figure: Spread): string {
  const { median, min, max, rounds, goal, verdict, rounds_met } = figure;
  const range = `${median.toFixed(3)} (${min.toFixed(3)}-${max.toFixed(3)}, ${rounds.length} rounds)`;
  if (goal === undefined) return range;
  return `${range}   goal ${goal}: ${verdict} (in ${rounds_met} of ${rounds.length} rounds)`;
}

export const round = (value: number, digits = 1) => Number(value.toFixed(digits));
